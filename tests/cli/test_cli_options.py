"""The shared workload options through the real entry point: one help and one default per option
across every command, names and dtypes forgiven case and spaces, errors that name the option the
user gave, per-GPU prices, and --tp / --ep / --kv-bits wherever a decode step is timed."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.cli.workload_options import DEFAULT_WORKLOAD, WORKLOAD_OPTIONS, parse_prices

runner = CliRunner()

#: the commands that take the shared workload options
WORKLOAD_COMMANDS = ("analyze", "report", "sweep", "compare", "kv", "moe", "speculative", "disagg")


def run(*args: str):
    return runner.invoke(app, list(args))


def run_json(*args: str) -> dict:
    r = run(*args, "--json")
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def one_line_error(r) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def _click_commands() -> dict:
    import typer

    group = typer.main.get_command(app)
    return {name: group.commands[name] for name in WORKLOAD_COMMANDS}


def test_each_shared_option_has_one_help_and_one_default_everywhere():
    """Every command that takes a shared option shows its one help text and its one default."""
    seen: dict[str, set] = {}
    for name, cmd in _click_commands().items():
        shared = cmd.callback.__shared_options__
        assert shared, f"{name} takes no shared workload option"
        for p in cmd.params:
            if p.name in shared:
                seen.setdefault(p.name, set()).add((p.help, "required" if p.required else repr(p.default)))
    assert {"batch", "prompt", "gen", "context", "dtype", "tp", "ep", "kv_bits", "price", "mode", "engine"} <= set(seen)
    for option, variants in seen.items():
        helps = {h for h, _ in variants}
        assert len(helps) == 1, f"--{option} has {len(helps)} help texts: {helps}"
        defaults = {d for _, d in variants if d != "required"}
        assert len(defaults) <= 1, f"--{option} has defaults {defaults}"
    # the options the what-ifs were missing are there
    for cmd in ("kv", "speculative", "sweep"):
        names = {p.name for p in _click_commands()[cmd].params}
        assert {"tp", "ep", "kv_bits"} <= names, (cmd, names)


def test_one_default_workload_and_no_warning_at_defaults():
    """Every command left at its defaults runs the same workload, and warns about nothing."""
    d = DEFAULT_WORKLOAD
    a = run_json("analyze")
    assert (a["workload"]["batch"], a["workload"]["prompt_len"], a["workload"]["gen_len"]) == (d.batch, d.prompt_tokens, d.gen_tokens)
    c = run_json("compare")
    assert (c["batch"], c["prompt_tokens"], c["gen_tokens"]) == (d.batch, d.prompt_tokens, d.gen_tokens)
    assert c["rows"][0]["ttft_s"] == pytest.approx(a["ttft_s"], rel=1e-12)
    kv = run_json("kv")
    assert (kv["model"], kv["hw"], kv["batch"], kv["context_tokens"]) == (d.model, d.hw, d.batch, d.context_tokens)
    moe = run_json("moe", "--model", "mixtral-8x7b")
    assert moe["context_tokens"] == d.context_tokens
    for args in (["analyze"], ["compare"], ["kv"], ["moe", "--model", "deepseek-v2-lite"], ["disagg", "--rate", "1", "--ttft-target", "1", "--tpot-target", "0.1"],
                 ["speculative", "-k", "3", "-a", "0.7", "--model", d.model]):
        r = run(*args)
        assert r.exit_code == 0, r.output
        assert r.stderr == "", (args, r.stderr)


@pytest.mark.parametrize("given, canonical", [
    (["--dtype", "BF16"], ["--dtype", "bf16"]),
    (["--dtype", " bf16 "], ["--dtype", "bf16"]),
    (["--model", " llama-3-8b"], ["--model", "llama-3-8b"]),
    (["--model", "Llama-3-8B "], ["--model", "llama-3-8b"]),
    (["--hw", "H200"], ["--hw", "h200"]),
    (["--weight-dtype", " INT4", "--kv-dtype", "FP8"], ["--weight-dtype", "int4", "--kv-dtype", "fp8"]),
], ids=["dtype-case", "dtype-spaces", "model-space", "model-case", "hw-case", "weight-kv-dtype"])
def test_case_and_spaces_are_forgiven_in_names_and_dtypes(given, canonical):
    assert run_json("analyze", *given) == run_json("analyze", *canonical)


def test_forgiven_names_in_the_what_ifs_and_lists():
    assert run_json("kv", "--model", " LLAMA-3-8B", "--kv-dtype", "FP8") == run_json("kv", "--model", "llama-3-8b", "--kv-dtype", "fp8")
    rows = run_json("compare", "--hw", "H100-SXM, h200")["rows"]
    assert [r["hw"] for r in rows] == ["h100-sxm", "h200"]


@pytest.mark.parametrize("args, option", [
    (["speculative", "-k", "3", "-a", "0.7", "--model", "llama-3-8b", "--context", "0"], "--context"),
    (["kv", "--context", "0"], "--context"),
    (["kv", "--batch", "0"], "--batch"),
    (["moe", "--model", "mixtral-8x7b", "--context", "0"], "--context"),
    (["compare", "--prompt", "0"], "--prompt"),
    (["disagg", "--rate", "1", "--ttft-target", "1", "--tpot-target", "0.1", "--gen", "0"], "--gen"),
    (["analyze", "--tp", "0"], "--tp"),
    (["kv", "--tp", "3"], "--tp"),
    (["sweep", "--model", "llama-3-8b", "--hw", "h100-sxm", "-o", "x.csv", "--ep", "0"], "--ep"),
    (["analyze", "--price", "h100-sxm=abc"], "--price"),
    (["compare", "--hw", "h100-sxm,h200", "--price", "b200=3"], "--price"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v[:1] + v[-2:]))
def test_errors_name_the_option_the_user_gave(args, option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # nothing is written; if it were, not into the repository
    line = one_line_error(run(*args))
    assert option in line, line
    named = {w.strip("'\",:;()") for w in line.split() if w.strip("'\",:;()").startswith("--")}
    cmd_options = {o for p in _all_params(args[0]) for o in p.opts}
    assert named <= cmd_options | {"--hw"}, f"{line!r} names options {args[0]} does not have: {named - cmd_options}"


def _all_params(command: str):
    import typer

    return typer.main.get_command(app).commands[command].params


def test_kv_never_blames_an_option_it_does_not_have(tmp_path):
    """A config whose head is too small for an NTK-aware RoPE base, past its trained context: the
    warning stands, with no suggestion naming rope's --rotary-dim."""
    cfg = json.loads(_preset_path("llama-3-8b").read_text())
    cfg.pop("_rooflinecli", None)
    cfg.update(head_dim=2, max_position_embeddings=512)
    path = tmp_path / "tiny-head.json"
    path.write_text(json.dumps(cfg))
    r = run("kv", "--model", str(path), "--context", "4096")
    assert r.exit_code == 0, r.output
    assert "--rotary-dim" not in r.output and "trained limit of 512" in r.stderr


def _preset_path(name: str):
    from rooflinecli.model_registry import presets_dir

    return presets_dir() / f"{name}.json"


def test_prices_per_gpu_scale_each_gpus_cost():
    one = run_json("compare", "--hw", "h100-sxm,h200", "--price", "1")["rows"]
    per = run_json("compare", "--hw", "h100-sxm,h200", "--price", "h100-sxm=2.49,h200=3.5")["rows"]
    assert per[0]["cost_per_million_output_tokens_usd"] == pytest.approx(2.49 * one[0]["cost_per_million_output_tokens_usd"], rel=1e-12)
    assert per[1]["cost_per_million_output_tokens_usd"] == pytest.approx(3.5 * one[1]["cost_per_million_output_tokens_usd"], rel=1e-12)
    # a GPU left unpriced has no cost, and the table says so with a dash
    part = run_json("compare", "--hw", "h100-sxm,h200", "--price", "h200=3.5")["rows"]
    assert part[0]["cost_per_million_output_tokens_usd"] is None and part[1]["cost_per_million_output_tokens_usd"] is not None
    r = run("compare", "--hw", "h100-sxm,h200", "--price", "h200=3.5")
    assert r.exit_code == 0 and "USD per M" in r.stdout
    # the old spelling still takes one price
    a = run_json("analyze", "--price-per-gpu-hour", "2.5")
    assert a["cost_per_million_output_tokens_usd"] == pytest.approx(2.5 * run_json("analyze", "--price", "1")["cost_per_million_output_tokens_usd"])


@pytest.mark.parametrize("text", ["-1", "nan", "inf", "1e7", "h100-sxm", "h100-sxm=", "=2", "a=1,a=2", ","])
def test_bad_prices_are_refused(text):
    import typer

    with pytest.raises(typer.BadParameter):
        parse_prices(text)


def test_tp_ep_and_kv_bits_move_the_what_ifs():
    base = run_json("kv")["variants"][0]
    tp2 = run_json("kv", "--tp", "2")["variants"][0]
    assert tp2["kv_cache_bytes"] == pytest.approx(base["kv_cache_bytes"] / 2, rel=1e-12)  # 8 KV heads split over 2 GPUs
    four = run_json("kv", "--kv-bits", "4")["variants"][0]
    assert four["kv_cache_bytes"] == pytest.approx(base["kv_cache_bytes"] / 4, rel=1e-12)  # 16 -> 4 bits
    s1 = run_json("speculative", "-k", "3", "-a", "0.7", "--model", "llama-3-8b")
    s2 = run_json("speculative", "-k", "3", "-a", "0.7", "--model", "llama-3-8b", "--tp", "2")
    assert s2["target_step_time_s"] < s1["target_step_time_s"]
    assert (s2["tp"], s2["ep"], s2["context_tokens"]) == (2, 1, DEFAULT_WORKLOAD.context_tokens)
    assert run_json("kv", "--tp", "2")["tp"] == 2
    m1 = run_json("moe", "--model", "mixtral-8x7b", "--batch", "64")["decode_by_batch"][0]
    m4 = run_json("moe", "--model", "mixtral-8x7b", "--batch", "64", "--kv-bits", "4")["decode_by_batch"][0]
    assert m4["kv_read_bytes"] == pytest.approx(m1["kv_read_bytes"] / 4, rel=1e-12)


def test_sweep_takes_ep_and_kv_bits(tmp_path):
    import csv

    out = tmp_path / "s.csv"
    r = run("sweep", "--model", "mixtral-8x7b", "--hw", "h100-sxm", "-o", str(out), "--batch", "8", "--context", "1k",
            "--phase", "decode", "--ep", "2", "--kv-bits", "4", "-q")
    assert r.exit_code == 0, r.output
    row = next(csv.DictReader(out.open()))
    ref = tmp_path / "r.csv"
    assert run("sweep", "--model", "mixtral-8x7b", "--hw", "h100-sxm", "-o", str(ref), "--batch", "8", "--context", "1k",
               "--phase", "decode", "-q").exit_code == 0
    base = next(csv.DictReader(ref.open()))
    assert row["kv_dtype"] == "4-bit"
    # 4-bit KV (/4), and EP 2 over TP 1 runs attention data-parallel: each GPU attends for 4 of the 8 sequences (/2)
    assert float(row["kv_read_bytes"]) == pytest.approx(float(base["kv_read_bytes"]) / 8, rel=1e-12)
    assert float(row["weights_bytes"]) < float(base["weights_bytes"])  # each GPU holds half the experts


def _priced_spec(tmp_path, price_table: str, gpu_id: str = "priced-h100"):
    from rooflinecli.hardware import specs_dir

    text = (specs_dir() / "h100-sxm.toml").read_text()
    text = "\n".join(f'id = "{gpu_id}"' if line.startswith("id = ") else line for line in text.splitlines())
    path = tmp_path / f"{gpu_id}.toml"
    path.write_text(text + "\n\n" + price_table)
    return path


def test_a_cited_price_in_the_spec_file_is_the_default_and_price_overrides_it(tmp_path):
    path = _priced_spec(tmp_path, '[price]\nusd_per_gpu_hour = 2.49\nsource = "a cloud list price"\nas_of = "2026-11"\n')
    unit = run_json("analyze", "--price", "1")["cost_per_million_output_tokens_usd"]
    cited = run_json("analyze", "--hw", str(path))
    assert cited["cost_per_million_output_tokens_usd"] == pytest.approx(2.49 * unit, rel=1e-12)
    r = run("analyze", "--hw", str(path), "--no-ops")
    assert "at $2.49 per GPU-hour, cited: a cloud list price (as of 2026-11)" in r.stdout
    given = run_json("analyze", "--hw", str(path), "--price", "priced-h100=5")
    assert given["cost_per_million_output_tokens_usd"] == pytest.approx(5 * unit, rel=1e-12)
    assert run_json("analyze")["cost_per_million_output_tokens_usd"] is None  # no price, no cost


@pytest.mark.parametrize("table, fragment", [
    ("[price]\nusd_per_gpu_hour = 2.49\n", "price.source: missing required key"),
    ('[price]\nusd_per_gpu_hour = -1\nsource = "x"\n', "price.usd_per_gpu_hour"),
    ('[price]\nusd_per_gpu_hour = 2490\nsource = "x"\n', "price.usd_per_gpu_hour"),
    ('[price]\nusd_per_hour = 2\nsource = "x"\n', "usd_per_hour"),
], ids=["no-source", "negative", "cents", "unknown-key"])
def test_a_bad_price_in_a_spec_file_is_one_line(tmp_path, table, fragment):
    path = _priced_spec(tmp_path, table)
    line = one_line_error(run("analyze", "--hw", str(path)))
    assert fragment in line, line


@pytest.mark.parametrize("args, option", [
    (["analyze", "--model", "llama-9"], "--model"),
    (["analyze", "--model", " "], "--model"),
    (["kv", "--hw", "h10"], "--hw"),
    (["compare", "--hw", "h100-sxm,nope"], "--hw"),
    (["analyze", "--dtype", "bf17"], "--dtype"),
    (["kv", "--kv-dtype", "fp9"], "--kv-dtype"),
    (["moe", "--model", "mixtral-8x7b", "--weight-dtype", "int3"], "--weight-dtype"),
    (["analyze", "--engine", "vllm2"], "--engine"),
    (["analyze", "--mode", "fastest"], "--mode"),
    (["analyze", "--mla-decode", "folded"], "--mla-decode"),
    (["speculative", "-k", "0", "-a", "0.7", "--model", "llama-3-8b"], "--draft-tokens"),
    (["attention-io", "--seq", "1k", "--head-dim", "64", "--dtype", "int4"], "--dtype"),
    (["rope", "--model", "nope", "--target-context", "32k"], "--model"),
    (["sweep", "--model", "llama-3-8b,nope", "--hw", "h100-sxm", "-o", "x.csv"], "--model"),
    (["sweep", "--model", "llama-3-8b", "--hw", "h100-sxm", "-o", "x.csv", "--kv-dtype", "bf16,fp9"], "--kv-dtype"),
    (["report", "--results", "no-such-results.json"], "--results"),
    (["report", "--measured-hw", "h300"], "--measured-hw"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v[:1] + v[-2:]))
def test_unknown_names_are_refused_under_the_option_given(args, option, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    line = one_line_error(run(*args))
    assert option in line, line


def test_sweep_at_its_defaults_stays_inside_the_trained_context_and_warns_about_nothing(tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "s.parquet"
    r = run("sweep", "--model", "llama-3-8b,mistral-7b", "--hw", "h100-sxm", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert "warning" not in r.stderr and r.stderr.startswith("wrote ")
    contexts = sorted(set(pq.read_table(out).column("context_tokens").to_pylist()))
    assert contexts == [1024, 2048, 4096, 8192]  # llama-3-8b's 8,192 is the shorter trained context


def test_show_commands_forgive_case_and_spaces_too():
    assert run_json("hw", "show", " H200") == run_json("hw", "show", "h200")
    assert run_json("model", "show", "Llama-3-8B ") == run_json("model", "show", "llama-3-8b")


# ---- property: any casing and padding of a known name is that name; any bad value is blamed on its option

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rooflinecli.cli.options import dtype_parser, forgive_gpu_names, forgive_model_names  # noqa: E402
from rooflinecli.dtypes import KV_DTYPES  # noqa: E402

PAD = st.text(alphabet=" \t", max_size=3)


def _mangle(name: str, flips: list[bool]) -> str:
    return "".join(c.upper() if f else c for c, f in zip(name, flips + [False] * len(name)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind=st.sampled_from(["model", "gpu", "kv"]), pick=st.integers(0, 1000), flips=st.lists(st.booleans(), max_size=20),
       left=PAD, right=PAD)
def test_any_case_and_padding_of_a_known_name_is_that_name(kind, pick, flips, left, right):
    from rooflinecli.hardware import all_specs
    from rooflinecli.model_registry import preset_ids

    known = {"model": sorted(preset_ids()), "gpu": sorted(all_specs()), "kv": list(KV_DTYPES)}[kind]
    name = known[pick % len(known)]
    given_ = left + _mangle(name, flips) + right
    parse = {"model": forgive_model_names, "gpu": forgive_gpu_names, "kv": dtype_parser(KV_DTYPES, "KV dtype")}[kind]
    assert parse(given_) == name


#: (command and its required arguments, option, a value it must refuse)
REFUSALS = [
    (["kv"], "--batch", "0"), (["kv"], "--context", "-3"), (["kv"], "--tp", "0"), (["kv"], "--kv-bits", "0.5"),
    (["kv"], "--kv-block-size", "0"), (["compare"], "--gen", "0"), (["compare"], "--ep", "-1"),
    (["analyze"], "--weight-group-size", "0"), (["analyze"], "--expert-skew", "0.5"), (["analyze"], "--launch-overhead-us", "-1"),
    (["analyze"], "--efficiency", "2"), (["analyze"], "--prefill-chunk", "-1"), (["analyze"], "--price", "-2"),
    (["speculative", "-k", "2", "-a", "0.5", "--model", "llama-3-8b"], "--batch", "0"),
    (["speculative", "-k", "2", "--model", "llama-3-8b"], "--acceptance", "1.5"),
    (["disagg", "--ttft-target", "1", "--tpot-target", "0.1"], "--rate", "-1"),
    (["disagg", "--rate", "1", "--ttft-target", "1", "--tpot-target", "0.1"], "--max-batch", "0"),
    (["moe", "--model", "mixtral-8x7b"], "--skew", "0.5"),
]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(REFUSALS), spaces=PAD)
def test_a_refused_value_is_blamed_on_its_own_option(case, spaces):
    base, option, value = case
    line = one_line_error(run(*base, option, spaces + value))
    assert option in line or (option == "--acceptance" and "-a" in line), line
    cmd_options = {o for p in _all_params(base[0]) for o in p.opts}
    named = {w.strip("'\",:;()") for w in line.split() if w.strip("'\",:;()").startswith("--")}
    assert named <= cmd_options, (line, named - cmd_options)


def test_the_shared_defaults_are_the_workloads_own():
    from rooflinecli.analysis.workload import DEFAULT_PREFILL_CHUNK_TOKENS, Workload

    from rooflinecli.cli.workload_options import shared_default

    assert shared_default("prefill_chunk") == DEFAULT_PREFILL_CHUNK_TOKENS
    wl = Workload(batch=1, prompt_len=1, gen_len=1)
    for option, field in (("dtype", "compute_dtype"), ("weight_dtype", "weight_dtype"), ("kv_dtype", "kv_dtype"), ("tp", "tp"), ("ep", "ep"),
                          ("weight_group_size", "weight_group_size"), ("expert_skew", "expert_skew"), ("mla_decode", "mla_decode")):
        assert shared_default(option) == getattr(wl, field), option
