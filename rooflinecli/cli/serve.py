"""``roofline serve``: serving under load (steady state, simulation, SLO search) and
``roofline serve validate`` (the model against measured serving runs)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from rooflinecli.cli.options import HwOption, JsonOption
from rooflinecli.cli.workload_options import DEFAULT_WORKLOAD, SHARED, workload_options
from rooflinecli.errors import RooflineError

serve_app = typer.Typer(help="Serving under load: in-flight batching, disaggregation, SLO search.", invoke_without_command=True)

IslOption = Annotated[int, typer.Option("--isl", min=1, help="Input (prompt) tokens per request.")]
OslOption = Annotated[int, typer.Option("--osl", min=1, help="Output tokens per request.")]


def _echo_notes(notes) -> None:
    for n in notes:
        typer.echo(f"note: {n}", err=True)


def _one_line_errors(fn):
    """The group's own callback is not among the commands the app wraps: wrap it the same way."""
    from rooflinecli.cli import one_line_errors

    return one_line_errors(fn)


@serve_app.callback()
@_one_line_errors
@workload_options
def serve_cmd(
    ctx: typer.Context,
    model=SHARED,
    hw: HwOption = DEFAULT_WORKLOAD.hw,
    isl: IslOption = 1024,
    osl: OslOption = 256,
    concurrency: Annotated[int | None, typer.Option("--concurrency", min=1, help="Clients, each sending its next request when the last ends (closed loop, as benchmark clients).")] = None,
    rate: Annotated[float | None, typer.Option("--rate", help="Arrival rate, requests/s (open loop, Poisson).")] = None,
    disagg: Annotated[str | None, typer.Option("--disagg", help="Disaggregated: P:D prefill and decode instances (each of --prefill-tp / --decode-tp GPUs).")] = None,
    prefill_tp: Annotated[int | None, typer.Option("--prefill-tp", min=1, help="--disagg: tensor-parallel GPUs per prefill instance (default --tp).")] = None,
    decode_tp: Annotated[int | None, typer.Option("--decode-tp", min=1, help="--disagg: tensor-parallel GPUs per decode instance (default --tp).")] = None,
    token_budget: Annotated[int | None, typer.Option("--token-budget", min=1, help="Scheduler's tokens per step (chunked prefill); default the engine's own (8,192; SGLang 16,384 on GPUs of 160 GiB or more).")] = None,
    memory_fraction: Annotated[float, typer.Option("--memory-fraction", help="Share of GPU memory for weights + KV cache + workspace.")] = 0.9,
    max_seqs: Annotated[int | None, typer.Option("--max-seqs", min=1, help="Most sequences running at once (default: what the KV cache holds).")] = None,
    simulate: Annotated[bool, typer.Option("--simulate", help="Also run the discrete-event simulation: p50/p90/p99 TTFT, TPOT, ITL, e2e.")] = False,
    requests: Annotated[int, typer.Option("--requests", min=1, help="--simulate: requests in the stream.")] = 2000,
    seed: Annotated[int, typer.Option("--seed", help="--simulate: seed of arrivals and lengths.")] = 0,
    burstiness: Annotated[float, typer.Option("--burstiness", help="--simulate --rate: gamma shape of the gaps (1 = Poisson, < 1 burstier).")] = 1.0,
    isl_spread: Annotated[float, typer.Option("--isl-spread", help="--simulate: prompt lengths uniform within this fraction of --isl.")] = 0.0,
    osl_spread: Annotated[float, typer.Option("--osl-spread", help="--simulate: output lengths uniform within this fraction of --osl.")] = 0.0,
    trace: Annotated[Path | None, typer.Option("--trace", help="--simulate: a CSV of arrival_s,input_tokens,output_tokens rows (the steady state takes its mean lengths and rate).")] = None,
    search: Annotated[bool, typer.Option("--search", help="Search layouts and loads for --gpus against the SLO: the frontier and the best.")] = False,
    gpus: Annotated[int | None, typer.Option("--gpus", min=1, help="--search: GPU budget.")] = None,
    ttft_ms: Annotated[float | None, typer.Option("--ttft-ms", help="--search: TTFT target, ms.")] = None,
    tpot_ms: Annotated[float | None, typer.Option("--tpot-ms", help="--search: TPOT target, ms.")] = None,
    min_tokens_per_s_per_user: Annotated[float | None, typer.Option("--min-tokens-per-s-per-user", help="--search: tokens/s per user target.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="--search: write every candidate to this .csv or .parquet file.")] = None,
    dtype=SHARED, weight_dtype=SHARED, kv_dtype=SHARED, tp=SHARED, ep=SHARED, mode=SHARED, engine=SHARED,
    json_out: JsonOption = False,
) -> None:
    """Serving figures of one configuration: TTFT, TPOT (as serving benchmarks define it), ITL,
    tokens/s per GPU and per user, memory per GPU; every step time from the one prediction path
    (achievable where the GPU is calibrated for the engine, the roof beside)."""
    if ctx.invoked_subcommand is not None:
        return
    from rooflinecli.cli.workload_options import workload_from_options
    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model

    from rooflinecli.serve.replica import DEFAULT_TOKEN_BUDGET
    from rooflinecli.serve.schedulers import step_policy

    cfg = get_model(model)
    spec = get_spec(hw)
    token_budget = token_budget or step_policy(engine, spec.memory_capacity_bytes, DEFAULT_TOKEN_BUDGET).prefill_tokens
    wl = workload_from_options(batch=1, prompt=isl, gen=osl, dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype, tp=tp, ep=ep,
                               engine=engine, prefill_chunk=token_budget)
    from dataclasses import replace

    from rooflinecli.cli.workload_options import checkpoint_workload, echo_dtype_notes

    wl, dtype_notes = checkpoint_workload(cfg, replace(wl, mode=mode), [spec])
    if search:
        _search(cfg, spec, wl, gpus=gpus, isl=isl, osl=osl, ttft_ms=ttft_ms, tpot_ms=tpot_ms, min_tps_user=min_tokens_per_s_per_user,
                token_budget=token_budget, memory_fraction=memory_fraction, out=out, json_out=json_out)
        echo_dtype_notes(dtype_notes)
        return
    from rooflinecli.serve.run import Load, parse_disagg, serve_point

    stream = None
    if trace is not None:  # the trace's requests: its mean lengths and (open loop) its mean rate for the steady state
        import numpy as np

        from rooflinecli.serve.arrivals import read_trace

        if not simulate:
            raise RooflineError("--trace is a request stream for --simulate; add --simulate")
        stream = read_trace(trace)
        isl = max(1, round(float(np.mean(stream.input_tokens))))
        osl = max(1, round(float(np.mean(stream.output_tokens))))
        if concurrency is None:
            if rate is not None:
                raise RooflineError("--trace sets the arrivals: drop --rate (or give --concurrency for a closed loop over its lengths)")
            span = float(stream.arrival_s[-1])
            if len(stream) < 2 or span <= 0:
                raise RooflineError(f"--trace {trace}: its arrivals span no time; give --concurrency for a closed loop over its lengths")
            rate = (len(stream) - 1) / span
    load = Load(concurrency, rate).check()
    d = parse_disagg(disagg)
    if d is None and (prefill_tp or decode_tp):
        raise RooflineError("--prefill-tp / --decode-tp need --disagg P:D")
    res = serve_point(cfg, spec, wl, isl=isl, osl=osl, load=load, disagg=d, prefill_tp=prefill_tp, decode_tp=decode_tp,
                      token_budget=token_budget, memory_fraction=memory_fraction, max_seqs=max_seqs)
    if simulate:
        if d is not None:
            raise RooflineError("--simulate runs aggregated serving; drop --disagg")
        res["simulation"] = _simulate(cfg, spec, wl, isl=isl, osl=osl, load=load, requests=requests, seed=seed, burstiness=burstiness,
                                      isl_spread=isl_spread, osl_spread=osl_spread, trace=trace, stream=stream, token_budget=token_budget,
                                      memory_fraction=memory_fraction, max_seqs=max_seqs)
    _echo_notes(res["notes"])
    echo_dtype_notes(dtype_notes)
    if json_out:
        from rooflinecli.fmt import json_dumps

        typer.echo(json_dumps(res))
        return
    _render_point(res)


def _simulate(cfg, spec, wl, *, isl, osl, load, requests, seed, burstiness, isl_spread, osl_spread, trace, stream, token_budget, memory_fraction, max_seqs) -> dict:
    import numpy as np

    from rooflinecli.serve import arrivals as A
    from rooflinecli.serve.replica import build_replica
    from rooflinecli.serve.sim import simulate

    rng = np.random.default_rng(seed)
    if stream is not None:
        if load.concurrency is not None:
            stream = A.Stream(None, stream.input_tokens, stream.output_tokens)
    else:
        ins = A.lengths(rng, requests, isl, isl_spread, "--isl-spread")
        outs = A.lengths(rng, requests, osl, osl_spread, "--osl-spread")
        arr = A.arrivals(rng, requests, load.rate_per_s, burstiness) if load.rate_per_s is not None else None
        stream = A.Stream(arr, ins, outs)
    longest = int(np.max(stream.input_tokens + stream.output_tokens))
    rep = build_replica(cfg, spec, wl, isl=isl, osl=osl, max_isl=int(np.max(stream.input_tokens)), max_context=longest,
                        token_budget=token_budget, memory_fraction=memory_fraction, max_seqs=max_seqs)
    from rooflinecli.serve.schedulers import step_policy

    res = simulate(rep.table, stream, token_budget=token_budget, kv_tokens=rep.kv_tokens, max_seqs=rep.kv_limit,
                   concurrency=load.concurrency, mixes_decode=step_policy(wl.engine, spec.memory_capacity_bytes, token_budget).mixes_decode)
    return {**res.summary(), "seed": seed, "trace": str(trace) if trace else None}


def _render_point(res: dict) -> None:
    from rooflinecli.fmt import fmt_bytes, fmt_num, fmt_time

    lay = res["layout"]
    load = f"concurrency {res['concurrency']:,}" if res["concurrency"] is not None else f"rate {res['rate_requests_per_s']:g} requests/s"
    where = (f"tp {lay['tp']}, ep {lay['ep']}, attention DP {lay['attention_dp']}" if res["serving"] == "aggregated" else
             f"{lay['prefill_instances']} prefill x tp {lay['prefill_tp']} + {lay['decode_instances']} decode x tp {lay['decode_tp']}")
    typer.echo(f"{res['model']} on {lay['gpus']} x {res['hardware']}, {res['serving']} ({where}), isl {res['isl_tokens']:,} / osl {res['osl_tokens']:,} tokens, {load}")
    typer.echo(f"mode: {res['mode']}" + (f", engine {res['engine']}" if res["engine"] else "") +
               ("" if res["calibration"] else " (roofline figures: no calibration for this engine on this GPU)"))
    roof = res["roof"]
    rows = [("TTFT", fmt_time(res["ttft_s"]), fmt_time(roof.get("ttft_s"))),
            ("TPOT", fmt_time(res["tpot_s"]), fmt_time(roof.get("tpot_s"))),
            ("ITL (mean)", fmt_time(res["itl_s"]), fmt_time(roof.get("itl_s"))),
            ("e2e latency", fmt_time(res["e2e_s"]), fmt_time(roof.get("e2e_s"))),
            ("queue wait", fmt_time(res["queue_wait_s"]), fmt_time(roof.get("queue_wait_s"))),
            ("requests/s", fmt_num(res["requests_per_s"]), fmt_num(roof.get("requests_per_s"))),
            ("output tokens/s per GPU", fmt_num(res["throughput_tokens_per_s_per_gpu"]), fmt_num(roof.get("throughput_tokens_per_s_per_gpu"))),
            ("tokens/s per user", fmt_num(res["tokens_per_s_per_user"]), fmt_num(roof.get("tokens_per_s_per_user")))]
    typer.echo(f"{'':26}{res['mode']:>14}{'roof':>14}")
    for name, a, b in rows:
        typer.echo(f"{name:26}{a:>14}{b:>14}")
    per = "" if res["serving"] == "aggregated" else " per decode instance"
    typer.echo(f"running sequences{per}: {fmt_num(res['running_sequences'])} of a KV limit of {res['kv_limit_sequences']:,}")
    mem = res["memory_bytes_per_gpu"]
    for label, m in ((("",), mem),) if "weights_bytes_per_gpu" in mem else ((("prefill ",), mem["prefill"]), (("decode ",), mem["decode"])):
        typer.echo(f"{label[0]}memory per GPU: weights {fmt_bytes(m['weights_bytes_per_gpu'])}, KV cache {fmt_bytes(m['kv_cache_bytes_per_gpu'])}, "
                   f"workspace {fmt_bytes(m['activation_workspace_bytes_per_gpu'])}, total {fmt_bytes(m['total_bytes_per_gpu'])} "
                   f"of {fmt_bytes(m['usable_bytes_per_gpu'])} usable")
    sim = res.get("simulation")
    if sim:
        typer.echo(f"simulation ({sim['requests']:,} requests, seed {sim['seed']}):{'mean':>12}{'p50':>12}{'p90':>12}{'p99':>12}")
        for key, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT"), ("itl_s", "ITL"), ("e2e_s", "e2e")):
            v = sim[key]
            typer.echo(f"  {label:40}" + "".join(f"{fmt_time(v[q]):>12}" for q in ("mean", "p50", "p90", "p99")))
        typer.echo(f"  output tokens/s per GPU {fmt_num(sim['throughput_tokens_per_s_per_gpu'])}, requests/s {fmt_num(sim['requests_per_s'])}")


def _search(cfg, spec, wl, *, gpus, isl, osl, ttft_ms, tpot_ms, min_tps_user, token_budget, memory_fraction, out, json_out) -> None:
    from rooflinecli.fmt import fmt_num, fmt_time, json_dumps
    from rooflinecli.serve.search import COLUMNS, Slo, row, search

    if gpus is None:
        raise RooflineError("--search needs --gpus N (the GPU budget)")
    if out is not None and out.suffix.lower() not in (".csv", ".parquet"):
        raise RooflineError(f"--out {out}: name a .csv or .parquet file")
    if ttft_ms is None and tpot_ms is None and min_tps_user is None:
        raise RooflineError("--search needs a target: --ttft-ms, --tpot-ms and/or --min-tokens-per-s-per-user")
    slo = Slo(ttft_ms / 1e3 if ttft_ms is not None else None, tpot_ms / 1e3 if tpot_ms is not None else None, min_tps_user)
    res = search(cfg, spec, wl, gpus=gpus, isl=isl, osl=osl, slo=slo, token_budget=token_budget, memory_fraction=memory_fraction)
    table = res["candidates"]
    if out is not None:
        _write_candidates(out, table, COLUMNS)
    import numpy as np

    front = np.flatnonzero(table["on_frontier"])
    front = front[np.argsort(-table["throughput_tokens_per_s_per_gpu"][front])]
    best = row(table, res["best"]) if res["best"] is not None else None
    nearest = row(table, res["nearest"]) if res["nearest"] is not None else None
    _echo_notes(res["notes"])
    if best is None:
        typer.echo(f"note: no configuration meets the SLO; the nearest misses by {res['nearest_ratio']:.2f}x "
                   f"(TTFT {fmt_time(nearest['ttft_s'])}, TPOT {fmt_time(nearest['tpot_s'])}, {fmt_num(nearest['tokens_per_s_per_user'])} tokens/s per user)", err=True)
    if json_out:
        typer.echo(json_dumps({"model": cfg.name, "hardware": spec.id, "gpus": gpus, "isl_tokens": isl, "osl_tokens": osl,
                               "slo": {"ttft_s": slo.ttft_s, "tpot_s": slo.tpot_s, "min_tokens_per_s_per_user": slo.min_tokens_per_s_per_user},
                               "candidates": res["count"], "best": best, "nearest": nearest, "frontier": [row(table, int(i)) for i in front],
                               "skipped_layouts": res["skipped_layouts"], "notes": res["notes"]}))
        return
    typer.echo(f"{cfg.name} on up to {gpus:,} x {spec.id}, isl {isl:,} / osl {osl:,}: {res['count']:,} candidates, {len(front):,} on the frontier")
    head = f"{'serving':14}{'layout':30}{'GPUs':>6}{'conc.':>8}{'TTFT':>11}{'TPOT':>11}{'tok/s/GPU':>11}{'tok/s/user':>11}  SLO"
    typer.echo(head)
    for i in front:
        typer.echo(_row_line(row(table, int(i)), fmt_num, fmt_time))
    if best is not None:
        typer.echo("best for the SLO: " + _row_line(best, fmt_num, fmt_time).strip())
    else:
        typer.echo("no configuration meets the SLO; nearest: " + _row_line(nearest, fmt_num, fmt_time).strip())


def _row_line(r, fmt_num, fmt_time) -> str:
    if r["serving"] == "aggregated":
        lay = f"{int(r['replicas'])} x (tp {r['tp']}, ep {r['ep']})"
    else:
        lay = f"{int(r['prefill_instances'])}P tp{r['prefill_tp']} + {int(r['decode_instances'])}D tp{r['tp']} ep{r['ep']}"
    return (f"{r['serving']:14}{lay:30}{int(r['gpus_used']):>6}{int(r['concurrency']):>8,}{fmt_time(r['ttft_s']):>11}{fmt_time(r['tpot_s']):>11}"
            f"{fmt_num(r['throughput_tokens_per_s_per_gpu']):>11}{fmt_num(r['tokens_per_s_per_user']):>11}  {'met' if r['meets_slo'] else '-'}")


def _write_candidates(path: Path, table: dict, columns) -> None:
    """Every candidate to ``path``: .csv (text) or .parquet (needs pyarrow), written atomically."""
    from rooflinecli.output import write_bytes_atomic, write_text_atomic

    suffix = path.suffix.lower()
    if suffix == ".csv":
        import csv
        import io

        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(columns)
        n = len(table[columns[0]])
        for i in range(n):
            w.writerow([(table[c][i].item() if hasattr(table[c][i], "item") else table[c][i]) for c in columns])
        write_text_atomic(path, buf.getvalue())
    elif suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise RooflineError(f"--out {path}: writing Parquet needs pyarrow (pip install pyarrow); or use a .csv name") from None
        import io

        sink = io.BytesIO()
        pq.write_table(pa.table({c: table[c] for c in columns}), sink)
        write_bytes_atomic(path, sink.getvalue())
    else:
        raise RooflineError(f"--out {path}: name a .csv or .parquet file")


@serve_app.command("validate")
def validate_cmd(
    source: Annotated[Path | None, typer.Option("--from", help="silicon_sample.csv of aiconfigurator-core (default: the installed package's).")] = None,
    list_unrepresented: Annotated[bool, typer.Option("--list", help="List every point the tool cannot represent, with its reason.")] = False,
    simulate: Annotated[bool, typer.Option("--simulate", help="Also run each aggregated point through the simulation, its clients starting together.")] = False,
    kv: Annotated[str, typer.Option("--kv-dtype", help="KV cache dtype of the runs (not recorded): auto (fp8 for fp8 runs, else bf16), bf16 or fp8.")] = "auto",
    requests_per_client: Annotated[int, typer.Option("--requests-per-client", min=1, help="Requests each benchmark client sends (not recorded; 10: --num-prompts = 10 x concurrency). TTFT is the mean over the first wave and the steady state after it.")] = 10,
    json_out: JsonOption = False,
) -> None:
    """Run every single-node measured serving point the tool can represent and print the error
    (TTFT and TPOT MAPE) per model, GPU, engine and serving mode, and overall."""
    from rooflinecli.serve.validate import find_silicon_csv, render, validate

    path = find_silicon_csv(source)
    res = validate(path, simulate=simulate, kv_dtype=kv, requests_per_client=requests_per_client)
    if json_out:
        from rooflinecli.fmt import json_dumps

        typer.echo(json_dumps(res))
        return
    typer.echo(render(res, list_unrepresented))


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")
