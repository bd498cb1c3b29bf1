"""``roofline sweep``: the CLI end to end (CSV and Parquet), rows checked by hand and against
single ``analyze`` runs (property test), bad input as one line with exit 2."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from rooflinecli.analysis import Workload
from rooflinecli.predict import analyze
from rooflinecli.cli import app
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.whatif import sweep as S

runner = CliRunner()


def test_sweep_csv_rows_by_hand(tmp_path):
    import pandas as pd
    out = tmp_path / "s.csv"
    r = runner.invoke(app, ["sweep", "--model", "llama-3-8b,mixtral-8x7b", "--hw", "h100-sxm,h200", "--batch", "1,4",
                            "--context", "1k..3k:1k", "--dtype", "bf16,fp8", "--out", str(out)])
    assert r.exit_code == 0, r.output
    df = pd.read_csv(out)
    assert list(df.columns) == list(S.COLUMNS)
    assert len(df) == 2 * 2 * 2 * 2 * 2 * 3  # models x GPUs x dtypes x phases x batches x contexts
    row = df[(df.model == "llama-3-8b") & (df.hw == "h200") & (df.phase == "decode") & (df.dtype == "fp8") & (df.batch == 4) & (df.context_tokens == 2048)]
    assert len(row) == 1
    row = row.iloc[0]
    assert row.weight_dtype == "fp8" and row.kv_dtype == "bf16"
    assert row.kv_cache_bytes_per_gpu == 2 * 32 * 8 * 128 * 2 * 2048 * 4  # 2*L*H_kv*D*b*N*B
    assert row.tokens_per_s_per_replica == pytest.approx(4 / row.time_s)
    assert row.time_s == pytest.approx(max(row.compute_time_s, row.memory_time_s), rel=1e-9)
    pre = df[(df.phase == "prefill") & (df.batch == 4) & (df.context_tokens == 3072)].iloc[0]
    assert pre.tokens_per_s_per_replica == pytest.approx(4 * 3072 / pre.time_s)
    assert "wrote 96 rows" in r.output


def test_sweep_parquet_matches_analyze(tmp_path):
    import pyarrow.parquet as pq
    out = tmp_path / "s.parquet"
    r = runner.invoke(app, ["sweep", "--model", "deepseek-v3", "--hw", "h200", "--batch", "1..64:x4", "--context", "512,4k",
                            "--kv-dtype", "fp8", "--out", str(out), "-q"])
    assert r.exit_code == 0, r.output
    t = pq.read_table(out).to_pylist()
    assert len(t) == 2 * 4 * 2
    row = next(x for x in t if x["phase"] == "decode" and x["batch"] == 16 and x["context_tokens"] == 4096)
    a = analyze(get_model("deepseek-v3"), get_spec("h200"), Workload(batch=16, prompt_len=4096, gen_len=1, kv_dtype="fp8"))
    assert row["time_s"] == pytest.approx(a.tpot_s, rel=1e-9)
    assert row["fits"] is False  # 671B parameters do not fit one H200


MODELS = ["llama-3-8b", "llama-3-70b", "mixtral-8x7b", "deepseek-v3", "mistral-7b", "qwen3-30b-a3b", "gpt2"]
GPUS = ["h100-sxm", "h200", "a100-sxm", "mi300x"]


@settings(max_examples=25, deadline=None)
@given(
    model=st.sampled_from(MODELS),
    hw=st.sampled_from(GPUS),
    batches=st.lists(st.integers(1, 512), min_size=1, max_size=4, unique=True),
    contexts=st.lists(st.integers(1, 65536), min_size=1, max_size=4, unique=True),
    kv=st.sampled_from(["bf16", "fp8"]),
    pick=st.integers(0, 10**6),
)
def test_sweep_rows_equal_single_analyze_runs(model, hw, batches, contexts, kv, pick):
    cfg, spec = get_model(model), get_spec(hw)
    B, N = np.sort(np.asarray(batches)), np.sort(np.asarray(contexts))
    (combo,) = S.make_combos([cfg], [spec], ["bf16"], [kv])
    i = pick % (B.size * N.size)
    b, n = int(B[i // N.size]), int(N[i % N.size])
    a = analyze(cfg, spec, Workload(batch=b, prompt_len=n, gen_len=1, kv_dtype=kv))
    for phase, res in (("prefill", a.prefill), ("decode", a.decode)):
        cols = S.block_columns(combo, phase, B, N)
        assert (cols["batch"][i], cols["context_tokens"][i]) == (b, n)
        for key in ("time_s", "flops", "bytes", "compute_time_s", "memory_time_s", "weights_bytes", "kv_read_bytes"):
            assert cols[key][i] == pytest.approx(res.totals[key], rel=1e-9, abs=1e-30), (phase, key)
        assert bool(cols["compute_bound"][i]) == (res.bound == "compute")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--batch", "1..abc"], "--batch"),
        (["--context", "0..4"], "--context"),
        (["--context", "8..2"], "ends before it starts"),
        (["--dtype", "bf16,fp9"], "fp9"),
        (["--kv-dtype", "fp9"], "fp9"),
        (["--weight-dtype", "int3"], "int3"),
        (["--model", "llama-3-8b,nope"], "nope"),
        (["--hw", "h10"], "h10"),
        (["--phase", "train"], "train"),
        (["--out", "x.xlsx"], ".parquet or .csv"),
        (["--tp", "3"], "3"),
    ],
)
def test_sweep_bad_input(tmp_path, args, fragment):
    base = {"--model": "llama-3-8b", "--hw": "h100-sxm", "--batch": "1,2", "--context": "1k", "--out": str(tmp_path / "s.csv")}
    for k in range(0, len(args), 2):
        base[args[k]] = args[k + 1]
    r = runner.invoke(app, ["sweep", *[x for kv in base.items() for x in kv]])
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and fragment in lines[0], r.output
    assert not (tmp_path / "s.csv").exists()


def test_sweep_failure_leaves_no_partial_file(tmp_path, monkeypatch):
    out = tmp_path / "s.parquet"
    out.write_bytes(b"old")

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(S, "_arrow_table", boom)
    with pytest.raises(RuntimeError):
        S.write_sweep(str(out), S.iter_blocks(S.make_combos([get_model("gpt2")], [get_spec("h200")], ["bf16"], ["bf16"]), np.array([1]), np.array([8])))
    assert out.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["s.parquet"]


def test_sweep_beyond_trained_context_warns(tmp_path):
    r = runner.invoke(app, ["sweep", "--model", "llama-3-8b", "--hw", "h100-sxm", "--batch", "1", "--context", "16k", "--out", str(tmp_path / "s.csv")])
    assert r.exit_code == 0 and "warning" in r.output and "roofline rope" in r.output


def test_sweep_memory_columns_follow_analyze_and_prefill_chunk(tmp_path):
    """total_bytes_per_gpu / fits are analysis.memory_totals at prompt = cache = context, with the
    workspace of a chunked prefill (8192 tokens by default, like analyze); --prefill-chunk 0 sizes
    it for the whole batch x context prefill."""
    import pandas as pd

    from rooflinecli.analysis import memory_totals

    cfg, spec = get_model("llama-3-8b"), get_spec("h100-sxm")
    totals = {}
    for chunk in ("8192", "0", "1k"):
        out = tmp_path / f"s{chunk}.csv"
        r = runner.invoke(app, ["sweep", "--model", "llama-3-8b", "--hw", "h100-sxm", "--batch", "1,64", "--context", "4k,32k",
                                "--phase", "decode", "--prefill-chunk", chunk, "--out", str(out), "-q"])
        assert r.exit_code == 0, r.output
        df = pd.read_csv(out)
        wl = Workload(batch=1, prompt_len=1, gen_len=1, prefill_chunk_tokens=int(chunk.replace("k", "")) * (1024 if "k" in chunk else 1) or None)
        for row in df.itertuples():
            m = memory_totals(cfg, spec, wl, row.context_tokens, row.context_tokens, row.batch)
            assert row.total_bytes_per_gpu == pytest.approx(float(m["total_bytes_per_gpu"]), rel=1e-12)
            assert row.fits == bool(m["fits"])
        totals[chunk] = df.set_index(["batch", "context_tokens"]).total_bytes_per_gpu
    assert (totals["1k"] <= totals["8192"]).all() and (totals["8192"] <= totals["0"]).all()
    assert totals["8192"][(64, 32768)] < totals["0"][(64, 32768)]  # 2M tokens unchunked vs one 8192-token chunk


def test_sweep_kv_cache_is_per_gpu_as_analyze_counts_it(tmp_path):
    """``kv_cache_bytes_per_gpu``: heads split over --tp, one KV head per GPU past the KV heads
    (Llama-3-8B, 8 KV heads, TP 16), MLA's latent on every GPU: analyze's memory figure."""
    import pandas as pd
    from rooflinecli.analysis import kv_cache_bytes_per_gpu

    for model, tp in (("llama-3-8b", 2), ("llama-3-8b", 16), ("deepseek-v2-lite", 8)):
        out = tmp_path / f"{model}-{tp}.csv"
        r = runner.invoke(app, ["sweep", "--model", model, "--hw", "h200", "--batch", "8", "--context", "8192", "--tp", str(tp),
                                "--phase", "decode", "--out", str(out)])
        assert r.exit_code == 0, r.output
        got = pd.read_csv(out).iloc[0].kv_cache_bytes_per_gpu
        cfg = get_model(model)
        assert got == pytest.approx(float(kv_cache_bytes_per_gpu(cfg, Workload(8, 8192, 1, tp=tp), 8192, 8)), rel=1e-12)
    full = 2 * 32 * 8 * 128 * 2 * 8192 * 8
    assert pd.read_csv(tmp_path / "llama-3-8b-2.csv").iloc[0].kv_cache_bytes_per_gpu == full / 2
    assert pd.read_csv(tmp_path / "llama-3-8b-16.csv").iloc[0].kv_cache_bytes_per_gpu == full / 8  # one of 8 heads each
