"""The serving model against measured serving runs: aiconfigurator-core's ``systems/silicon_sample.csv``
(TTFT and TPOT at a client concurrency, aggregated and disaggregated, per engine and GPU).

Each single-node point the tool can represent runs through ``serve.run.serve_point`` as measured
(closed loop at the run's concurrency, its TP / EP / attention DP, its dtypes); nothing is fitted
to these points. The rest are counted by reason. The file is read where given (``--from``) or
from an installed ``aiconfigurator_core`` package; the tool does not need the package otherwise.
"""

from __future__ import annotations

import csv
import re
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from rooflinecli.analysis.workload import Workload
from rooflinecli.errors import RooflineError

#: the measured run's model -> our preset of it (Llama 3.1 / DeepSeek-R1 / the FP8 checkpoints as
#: their own presets: same shapes as their families')
MODELS = {
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b-fp8",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "deepseek-ai/DeepSeek-R1": "deepseek-r1",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b-fp8",
    "openai/gpt-oss-120b": "gpt-oss-120b",
}
#: the run's model -> the preset whose ``quantization_config`` its fp8 runs' checkpoint has, where
#: ours of the model is its 16-bit layout: the published DeepSeek-V3 weights are stored fp8 in
#: 128 x 128 blocks, as DeepSeek-R1's (same shapes; the ``deepseek-v3`` preset is the bf16 layout)
FP8_CHECKPOINT_QUANT = {"deepseek-ai/DeepSeek-V3": "deepseek-r1"}
#: the run's system -> our GPU spec (single node: 8 GPUs per node)
SYSTEMS = {"h100_sxm": "h100-sxm", "h200_sxm": "h200", "b200_sxm": "b200"}
GPUS_PER_NODE = 8
#: the run's GEMM quantization -> (weight dtype, compute dtype); nvfp4 has no weight dtype here
QUANT = {"": ("bf16", "bf16"), "fp8": ("fp8", "fp8"), "fp8_block": ("fp8", "fp8"), "int4_wo": ("int4", "bf16")}


def find_silicon_csv(path: Path | None) -> Path:
    """``path`` when given, else ``systems/silicon_sample.csv`` of an installed aiconfigurator_core."""
    if path is not None:
        if not Path(path).is_file():
            raise RooflineError(f"--from {path}: no such file")
        return Path(path)
    import importlib.util

    spec = importlib.util.find_spec("aiconfigurator_core")
    if spec is None or not spec.submodule_search_locations:
        raise RooflineError("no silicon_sample.csv: give --from PATH, or install aiconfigurator-core (its systems/silicon_sample.csv)")
    for loc in spec.submodule_search_locations:
        p = Path(loc) / "systems" / "silicon_sample.csv"
        if p.is_file():
            return p
    raise RooflineError("aiconfigurator_core is installed but has no systems/silicon_sample.csv; give --from PATH")


def _int(v: str) -> int:
    return int(v) if v and v.strip().lstrip("-").isdigit() else 0


def concurrency_of(row: dict) -> int | None:
    m = re.search(r"silicon_concurrency=(\d+)", row.get("silicon_data_source", ""))
    if m:
        return int(m.group(1))
    return _int(row.get("batch_size", "")) or None


#: ``kv_dtype`` choices of the validation: the runs do not record their KV cache dtype
KV_CHOICES = ("auto", "bf16", "fp8")


def _is_moe(preset: str) -> bool:
    from rooflinecli.model_registry import get_model

    return get_model(preset).moe is not None


def point(row: dict, kv_dtype: str = "auto") -> tuple[dict | None, str | None]:
    """The serve configuration of one measured row, or (None, the reason it cannot be represented).
    ``kv_dtype``: "auto" takes an fp8 KV cache for fp8 runs and bf16 otherwise (the file does not
    say), or one dtype for every run."""
    model = MODELS.get(row["model_path"])
    if model is None:
        return None, f"model {row['model_path']} has no preset"
    gpu = SYSTEMS.get(row["system"])
    if gpu is None:
        return None, f"system {row['system']} has no spec (or is multi-node)"
    quant = row.get("gemm_quant_mode", "")
    if quant not in QUANT:
        return None, f"weights {quant}: no such weight dtype"
    moe = _is_moe(model)
    if moe and row.get("moe_quant_mode", "") not in QUANT:
        return None, f"MoE weights {row['moe_quant_mode']}: no such weight dtype"
    conc = concurrency_of(row)
    if not conc:
        return None, "no concurrency recorded"
    wdt, cdt = QUANT[quant]
    kv = kv_dtype if kv_dtype != "auto" else ("fp8" if wdt == "fp8" else "bf16")
    base = {"model": model, "hw": gpu, "engine": row["backend"], "isl_tokens": _int(row["isl"]), "osl_tokens": _int(row["osl"]), "concurrency": conc,
            "weight_dtype": wdt, "compute_dtype": cdt, "kv_dtype": kv}
    if wdt == "fp8" and row["model_path"] in FP8_CHECKPOINT_QUANT:
        base["quantization_from"] = FP8_CHECKPOINT_QUANT[row["model_path"]]

    def layout(prefix: str) -> tuple[tuple[int, int] | None, str | None]:
        tp, adp = _int(row[f"{prefix}tp_size"]) or 1, _int(row[f"{prefix}attention_dp_size"]) or 1
        mtp, mep = _int(row[f"{prefix}moe_tp_size"]) or 1, _int(row[f"{prefix}moe_ep_size"]) or 1
        if _int(row[f"{prefix}pp_size"]) > 1:
            return None, "pipeline parallel"
        gpus = tp * adp
        if not moe:
            if adp > 1:
                return None, "attention DP on a dense model"
            return (tp, 1), None
        if mtp > 1 and mep > 1:
            return None, "MoE TP x EP hybrid"
        if adp > 1 and tp > 1:
            return None, "attention TP x DP hybrid"
        ep = mep if mep > 1 else 1
        if adp > 1:  # attention data parallel over the EP group: our tp 1, ep = GPUs
            return ((1, gpus), None) if ep in (1, gpus) and mtp in (1,) else (None, "attention DP with MoE TP")
        if ep not in (1, tp):
            return None, "EP other than TP"
        return (tp, ep), None

    if row["mode"] == "agg":
        lay, why = layout("")
        if lay is None:
            return None, why
        if max(lay) > GPUS_PER_NODE:
            return None, "multi-node"
        return {**base, "serving": "aggregated", "tp": lay[0], "ep": lay[1]}, None
    if _int(row.get("prefill_batch_size", "")) > 1:
        return None, "prefill batch > 1"
    pl, why = layout("prefill_")
    if pl is None:
        return None, f"prefill: {why}"
    dl, why = layout("decode_")
    if dl is None:
        return None, f"decode: {why}"
    P, D = _int(row["prefill_num_workers"]) or 1, _int(row["decode_num_workers"]) or 1
    if P * max(pl) + D * max(dl) > GPUS_PER_NODE:
        return None, "multi-node"
    if pl[1] != 1 and pl[1] != pl[0]:
        return None, "prefill EP other than TP"
    return {**base, "serving": "disaggregated", "tp": pl[0], "ep": pl[1], "prefill": P, "decode": D, "decode_tp": dl[0], "decode_ep": dl[1]}, None


#: requests each client of a measured run sends: the file does not record it; taken from the
#: common serving-benchmark protocol (InferenceMAX's scripts run vLLM's ``benchmark_serving.py``
#: with ``--max-concurrency C --num-prompts 10*C``, every client starting at once). An assumption
#: about the benchmark, not a figure fitted to these points
BENCHMARK_REQUESTS_PER_CLIENT = 10


def benchmark_ttft(cache: dict, cfg, spec, wl: Workload, p: dict, steady_ttft_s: float, requests_per_client: int, token_budget: int) -> dict:
    """The mean TTFT a closed-loop benchmark reports: its ``requests_per_client`` waves are the
    first (every client's prompt arriving together at an idle engine) and then the steady state.
    On a scheduler whose prefill steps do not decode (``schedulers.step_policy``) the clients stay
    in step, so every wave is the first (``steady.lockstep_waves``): TTFT and TPOT are the waves'."""
    from .replica import DEFAULT_MEMORY_FRACTION
    from .run import replica_key
    from .schedulers import step_policy
    from .steady import Lengths, first_wave_ttft_s, lockstep_waves

    rep = cache[replica_key(cfg, spec, wl, isl=p["isl_tokens"], osl=p["osl_tokens"], token_budget=token_budget,
                            memory_fraction=DEFAULT_MEMORY_FRACTION, max_seqs=None)]
    lengths = Lengths(p["isl_tokens"], p["osl_tokens"])
    policy = step_policy(p["engine"], spec.memory_capacity_bytes, token_budget)
    if not policy.mixes_decode and p["concurrency"] <= rep.kv_limit:
        w = lockstep_waves(rep.table, lengths, p["concurrency"], rep.kv_limit, policy.prefill_tokens)
        return {"ttft_s": w["ttft_s"], "tpot_s": w["tpot_s"], "first_wave_ttft_s": w["ttft_s"], "steady_ttft_s": steady_ttft_s, "lockstep": True}
    first = first_wave_ttft_s(rep.table, lengths, p["concurrency"], rep.kv_limit, token_budget)
    k = float(requests_per_client)
    return {"ttft_s": (first + (k - 1.0) * steady_ttft_s) / k, "first_wave_ttft_s": first, "steady_ttft_s": steady_ttft_s}


def _model_and_spec(p: dict, cache: dict):
    """(model config, GPU spec) of a point, the config with its checkpoint's quantization where
    the run's differs from our preset's (``FP8_CHECKPOINT_QUANT``)."""
    from dataclasses import replace

    from rooflinecli.hardware import get_spec
    from rooflinecli.model_registry import get_model

    key = (p["model"], p["hw"], p.get("quantization_from"))
    if key not in cache:
        cfg = get_model(p["model"])
        if p.get("quantization_from"):
            cfg = replace(cfg, quantization=get_model(p["quantization_from"]).quantization)
        cache[key] = (cfg, get_spec(p["hw"]))
    return cache[key]


def _predict(p: dict, cache: dict, requests_per_client: int = BENCHMARK_REQUESTS_PER_CLIENT) -> dict:
    from .replica import DEFAULT_TOKEN_BUDGET
    from .run import Load, serve_point
    from .schedulers import step_policy

    cfg, spec = _model_and_spec(p, cache)
    wl = Workload(batch=1, prompt_len=p["isl_tokens"], gen_len=p["osl_tokens"], compute_dtype=p["compute_dtype"], weight_dtype=p["weight_dtype"],
                  kv_dtype=p["kv_dtype"], tp=p["tp"], ep=p["ep"], engine=p["engine"])
    if p["serving"] == "aggregated":
        budget = step_policy(p["engine"], spec.memory_capacity_bytes, DEFAULT_TOKEN_BUDGET).prefill_tokens
        out = serve_point(cfg, spec, wl, isl=p["isl_tokens"], osl=p["osl_tokens"], load=Load(concurrency=p["concurrency"]), replicas=cache,
                          token_budget=budget)
        if requests_per_client >= 1:
            out = {**out, **benchmark_ttft(cache, cfg, spec, wl, p, out["ttft_s"], requests_per_client, budget)}
        return out
    return serve_point(cfg, spec, wl, isl=p["isl_tokens"], osl=p["osl_tokens"], load=Load(concurrency=p["concurrency"]), disagg=(p["prefill"], p["decode"]),
                       prefill_tp=p["tp"], decode_tp=p["decode_tp"], decode_ep=p["decode_ep"], replicas=cache)


def _simulated(p: dict, cache: dict, requests_per_client: int = BENCHMARK_REQUESTS_PER_CLIENT) -> dict:
    """The benchmark as it runs: ``concurrency`` clients that start together, each sending its next
    request when the last ends (``requests_per_client`` each), through the discrete-event
    simulation; mean TTFT and TPOT."""
    from .arrivals import Stream
    from .replica import DEFAULT_TOKEN_BUDGET, build_replica
    from .schedulers import step_policy
    from .sim import simulate

    cfg, spec = _model_and_spec(p, cache)
    policy = step_policy(p["engine"], spec.memory_capacity_bytes, DEFAULT_TOKEN_BUDGET)
    key = ("sim", p["model"], p.get("quantization_from"), p["hw"], p["engine"], p["weight_dtype"], p["kv_dtype"], p["tp"], p["ep"], p["isl_tokens"], p["osl_tokens"])
    if key not in cache:
        wl = Workload(batch=1, prompt_len=p["isl_tokens"], gen_len=p["osl_tokens"], compute_dtype=p["compute_dtype"], weight_dtype=p["weight_dtype"],
                      kv_dtype=p["kv_dtype"], tp=p["tp"], ep=p["ep"], engine=p["engine"])
        cache[key] = build_replica(cfg, spec, wl, isl=p["isl_tokens"], osl=p["osl_tokens"], token_budget=policy.prefill_tokens)
    rep = cache[key]
    c = int(p["concurrency"])
    n = requests_per_client * c
    stream = Stream(None, np.full(n, p["isl_tokens"]), np.full(n, p["osl_tokens"]))
    s = simulate(rep.table, stream, token_budget=rep.workload.prefill_chunk_tokens, kv_tokens=rep.kv_tokens, max_seqs=rep.kv_limit,
                 concurrency=c, mixes_decode=policy.mixes_decode).summary()
    return {"ttft_s": s["ttft_s"]["mean"], "tpot_s": s["tpot_s"]["mean"]}


def _engine_known(name: str) -> bool:
    from rooflinecli.achievable import ENGINES

    return name in ENGINES


def validate(path: Path, simulate: bool = False, kv_dtype: str = "auto", requests_per_client: int = BENCHMARK_REQUESTS_PER_CLIENT) -> dict:
    """Per point: predicted and measured TTFT / TPOT; grouped MAPEs; the unrepresented by reason.
    ``simulate``: aggregated points also through the simulation (clients starting together);
    ``kv_dtype``: see ``point``."""
    if isinstance(requests_per_client, bool) or not isinstance(requests_per_client, int) or requests_per_client < 1:
        raise RooflineError(f"--requests-per-client must be a whole number >= 1, got {requests_per_client!r}")
    if kv_dtype not in KV_CHOICES:
        raise RooflineError(f"--kv-dtype must be one of {', '.join(KV_CHOICES)}, got '{kv_dtype}'")
    with Path(path).open(newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    need = {"model_path", "system", "backend", "mode", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms", "tp_size"}
    if rows and not need <= set(rows[0]):
        raise RooflineError(f"{path}: not a silicon_sample.csv (missing columns {', '.join(sorted(need - set(rows[0])))})")
    reasons: Counter = Counter()
    unrepresented: list[dict] = []
    points = []
    cache: dict = {}
    for line, row in enumerate(rows, start=2):
        p, why = point(row, kv_dtype)
        if p is not None and not _engine_known(p["engine"]):
            p, why = None, f"engine {p['engine']} has no profile"
        if p is not None:
            try:
                pred = _predict(p, cache, requests_per_client)
            except RooflineError as e:
                p, why = None, f"does not run: {str(e).split(':')[0]}" if "not even one sequence" not in str(e) else "does not fit in memory"
        if p is None:
            reasons[why] += 1
            unrepresented.append({"line": line, "id": row.get("id", ""), "reason": why})
            continue
        ttft_m, tpot_m = float(row["silicon_ttft_ms"]) / 1e3, float(row["silicon_tpot_ms"]) / 1e3
        q = {**p, "line": line, "measured_ttft_s": ttft_m, "measured_tpot_s": tpot_m, "ttft_s": pred["ttft_s"], "tpot_s": pred["tpot_s"],
             "mode": pred["mode"], "ttft_error": pred["ttft_s"] / ttft_m - 1.0, "tpot_error": pred["tpot_s"] / tpot_m - 1.0,
             **{k: pred[k] for k in ("first_wave_ttft_s", "steady_ttft_s", "lockstep") if k in pred}}
        if simulate and p["serving"] == "aggregated":
            sim = _simulated(p, cache, requests_per_client)
            q.update({"sim_ttft_s": sim["ttft_s"], "sim_tpot_s": sim["tpot_s"], "sim_ttft_error": sim["ttft_s"] / ttft_m - 1.0,
                      "sim_tpot_error": sim["tpot_s"] / tpot_m - 1.0})
        points.append(q)
    groups = defaultdict(list)
    for q in points:
        groups[(q["model"], q["hw"], q["engine"], q["serving"], q["mode"])].append(q)
    table = []
    for k in sorted(groups):
        g = groups[k]
        table.append({"model": k[0], "hw": k[1], "engine": k[2], "serving": k[3], "mode": k[4], "points": len(g),
                      "ttft_mape": float(np.mean([abs(q["ttft_error"]) for q in g])), "tpot_mape": float(np.mean([abs(q["tpot_error"]) for q in g])),
                      "ttft_bias": float(np.median([q["ttft_error"] for q in g])), "tpot_bias": float(np.median([q["tpot_error"] for q in g])),
                      **_sim_mapes(g)})
    overall = {}
    for serving in ("aggregated", "disaggregated"):
        g = [q for q in points if q["serving"] == serving]
        if g:
            overall[serving] = {"points": len(g), "ttft_mape": float(np.mean([abs(q["ttft_error"]) for q in g])),
                                "tpot_mape": float(np.mean([abs(q["tpot_error"]) for q in g])), **_sim_mapes(g)}
    return {"source": str(path), "kv_dtype": kv_dtype, "requests_per_client": requests_per_client, "rows": len(rows), "represented": len(points), "unrepresented": len(unrepresented), "groups": table,
            "overall": overall, "reasons": dict(reasons.most_common()), "unrepresented_points": unrepresented, "points": points}


def _sim_mapes(g: list[dict]) -> dict:
    s = [q for q in g if "sim_ttft_error" in q]
    if not s:
        return {}
    return {"sim_ttft_mape": float(np.mean([abs(q["sim_ttft_error"]) for q in s])), "sim_tpot_mape": float(np.mean([abs(q["sim_tpot_error"]) for q in s]))}


def render(res: dict, list_all: bool = False) -> str:
    kv = "fp8 for fp8 runs, else bf16" if res["kv_dtype"] == "auto" else res["kv_dtype"]
    lines = [f"{res['source']}: {res['rows']:,} measured points, {res['represented']:,} run, {res['unrepresented']:,} not representable",
             f"KV cache dtype (the runs do not record it): {kv}; closed loop at each run's concurrency, {res['requests_per_client']} requests per client "
             "(TTFT: the first wave, clients arriving together, then the steady state; SGLang: every wave, its prefill steps do not decode); nothing fitted to these points",
             f"{'model':21}{'GPU':10}{'engine':8}{'serving':15}{'mode':12}{'points':>7}{'TTFT MAPE':>11}{'TPOT MAPE':>11}{'TTFT bias':>11}{'TPOT bias':>11}"
             + (f"{'sim TTFT':>11}{'sim TPOT':>11}" if any("sim_ttft_mape" in g for g in res["groups"]) else "")]
    for g in res["groups"]:
        lines.append(f"{g['model']:21}{g['hw']:10}{g['engine']:8}{g['serving']:15}{g['mode']:12}{g['points']:>7}"
                     f"{g['ttft_mape']:>10.1%} {g['tpot_mape']:>10.1%} {g['ttft_bias']:>+10.1%} {g['tpot_bias']:>+10.1%}"
                     + (f"{g['sim_ttft_mape']:>10.1%} {g['sim_tpot_mape']:>10.1%}" if "sim_ttft_mape" in g else ""))
    for serving, o in res["overall"].items():
        lines.append(f"overall {serving}: {o['points']:,} points, TTFT MAPE {o['ttft_mape']:.1%}, TPOT MAPE {o['tpot_mape']:.1%}"
                     + (f"; simulated (clients starting together): TTFT MAPE {o['sim_ttft_mape']:.1%}, TPOT MAPE {o['sim_tpot_mape']:.1%}"
                        if "sim_ttft_mape" in o else ""))
    lines.append("not representable, by reason:")
    for why, n in res["reasons"].items():
        lines.append(f"  {n:>6,}  {why}")
    if list_all:
        for u in res["unrepresented_points"]:
            lines.append(f"  line {u['line']}: {u['id']}: {u['reason']}")
    return "\n".join(lines)
