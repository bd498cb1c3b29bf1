"""Sweeps in bounded memory: the grid in chunks (same rows, same order), streamed to Parquet row
groups and CSV batches, sized before any work (a refusal in under a second naming the limit and
the row count), peak memory that does not grow with the grid, and no file left behind by SIGTERM."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from typer.testing import CliRunner

from rooflinecli.cli import app
from rooflinecli.hardware import get_spec
from rooflinecli.model_registry import get_model
from rooflinecli.whatif import sweep as S

runner = CliRunner()


@pytest.mark.parametrize("nb,nn,chunk", [(1, 1, 1), (7, 5, 3), (7, 5, 10), (3, 1000, 64), (256, 130, 1 << 17), (2, 9, 9)])
def test_grid_chunks_cover_the_grid_in_row_order_within_the_chunk_size(nb, nn, chunk):
    B, N = np.arange(1, nb + 1), np.arange(100, 100 + nn)
    chunks = S.grid_chunks(B, N, chunk)
    assert all(0 < b.size * n.size <= chunk for b, n in chunks)
    rows = [(int(x), int(y)) for b, n in chunks for x in b for y in n]
    assert rows == [(int(x), int(y)) for x in B for y in N]  # batch-major, every point once


@pytest.mark.parametrize("model", ["llama-3-8b", "mixtral-8x7b", "deepseek-v3", "gpt2"])
def test_chunked_columns_equal_the_whole_grid(model):
    combos = S.make_combos([get_model(model)], [get_spec("h200"), get_spec("h200-measured")], ["bf16"], ["bf16"], None, None)
    B, N = np.arange(1, 12), np.array([1, 7, 64, 500, 1000, 4000, 9000])
    for combo in combos:
        for phase in S.PHASES:
            whole = S.block_columns(combo, phase, B, N)
            parts = [S.block_columns(combo, phase, b, n) for b, n in S.grid_chunks(B, N, 5)]
            for k, v in whole.items():
                assert np.array_equal(np.concatenate([p[k] for p in parts]), v), (combo.mode, phase, k)


def test_each_chunk_is_one_parquet_row_group_and_csv_is_the_same_rows(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    combos = S.make_combos([get_model("llama-3-8b")], [get_spec("h100-sxm")], ["bf16"], ["bf16"])
    B, N = np.arange(1, 6), np.arange(1000, 1040)
    S.write_sweep(str(tmp_path / "small.parquet"), S.iter_blocks(combos, B, N, chunk_rows=33))
    S.write_sweep(str(tmp_path / "whole.parquet"), S.iter_blocks(combos, B, N, chunk_rows=10_000))
    f = pq.ParquetFile(tmp_path / "small.parquet")
    # a batch row (40 contexts) is more than a chunk: 33 + 7 contexts, per batch value and phase
    assert f.metadata.num_rows == 2 * 5 * 40 and f.metadata.num_row_groups == 2 * 5 * 2
    assert [f.metadata.row_group(i).num_rows for i in range(4)] == [33, 7, 33, 7]
    assert pq.read_table(tmp_path / "small.parquet").equals(pq.read_table(tmp_path / "whole.parquet"))
    S.write_sweep(str(tmp_path / "small.csv"), S.iter_blocks(combos, B, N, chunk_rows=7))
    S.write_sweep(str(tmp_path / "whole.csv"), S.iter_blocks(combos, B, N, chunk_rows=10_000))
    small, whole = (tmp_path / "small.csv").read_text().splitlines(), (tmp_path / "whole.csv").read_text().splitlines()
    header = small[0]
    assert small.count(header) == 1 and len(small) == 401  # one header, every row once
    assert small == whole


def test_estimate_is_bounded_whatever_the_rows():
    small, huge = S.estimate(1000, "parquet"), S.estimate(S.CHUNK_ROWS * 1000, "csv")
    assert huge.peak_memory_bytes == S.estimate(S.CHUNK_ROWS * 2, "csv").peak_memory_bytes < 2e9
    assert small.peak_memory_bytes < huge.peak_memory_bytes
    assert huge.output_bytes == S.CHUNK_ROWS * 1000 * S.CSV_BYTES_PER_ROW


def test_a_sweep_over_the_row_limit_is_refused_in_under_a_second(tmp_path):
    out = tmp_path / "s.parquet"
    t0 = time.perf_counter()
    r = runner.invoke(app, ["sweep", "--model", "llama-3-8b,llama-3-70b", "--hw", "h100-sxm", "--batch", "1..256",
                            "--context", "1k..128k", "--out", str(out)])
    took = time.perf_counter() - t0
    assert r.exit_code == 2 and took < 1.0, (took, r.output)
    lines = r.output.strip().splitlines()
    assert len(lines) == 1 and "133,170,176 rows is above the limit of 100,000,000" in lines[0], r.output
    assert list(tmp_path.iterdir()) == []


def test_a_sweep_larger_than_the_free_disk_is_refused_before_work(tmp_path, monkeypatch):
    import rooflinecli.cli.sweep as cli_sweep

    monkeypatch.setattr(cli_sweep, "_free_bytes", lambda out: 10_000_000)
    out = tmp_path / "s.csv"
    r = runner.invoke(app, ["sweep", "--model", "llama-3-8b", "--hw", "h100-sxm", "--batch", "1..64", "--context", "1k..16k", "--out", str(out)])
    assert r.exit_code == 2, r.output
    line = r.output.strip().splitlines()[-1]
    rows = 64 * 15361 * 2
    assert f"{rows:,} rows need about" in line and "of csv and its folder has 10 MB free" in line and "write .parquet" in line, line
    assert list(tmp_path.iterdir()) == []


def test_the_size_is_said_before_the_work(tmp_path):
    out = tmp_path / "s.parquet"
    r = runner.invoke(app, ["sweep", "--model", "gpt2", "--hw", "h100-sxm", "--batch", "1..16", "--context", "1..8k", "--out", str(out)])
    assert r.exit_code == 0, r.output
    first = [ln for ln in r.output.splitlines() if ln.startswith("sweep:")][0]
    assert first.startswith("sweep: 262,144 rows, about ") and "peak memory about" in first and f"{S.CHUNK_ROWS:,} rows" in first


_MEASURED_RUN = """
import resource, sys
from rooflinecli.cli import app
sys.argv = ["roofline", *sys.argv[1:]]
try:
    app()
finally:
    print(f"maxrss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}", file=sys.stderr)
"""


def test_peak_memory_does_not_grow_with_the_grid(tmp_path):
    """8.4M rows of one (combination, phase): 1.45 GB peak RSS when the whole grid was one
    evaluation, about 0.19 GB in chunks (at most 0.6 GB seen: the chunk written, the one computed
    and their Arrow copies)."""
    out = tmp_path / "big.parquet"
    args = ["sweep", "--model", "llama-3-8b", "--hw", "h100-sxm", "--batch", "1..64", "--context", "1..128k", "--phase", "decode", "-q", "--out", str(out)]
    proc = subprocess.run([sys.executable, "-c", _MEASURED_RUN, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rss_mb = int(proc.stderr.rsplit("maxrss_kb=", 1)[1].split()[0]) / 1024
    assert rss_mb < 1000, rss_mb
    pq = pytest.importorskip("pyarrow.parquet")
    assert pq.ParquetFile(out).metadata.num_rows == 64 * 131072


def test_sigterm_during_a_sweep_leaves_no_file(tmp_path):
    out = tmp_path / "s.csv"
    proc = subprocess.Popen([sys.executable, "-m", "rooflinecli", "sweep", "--model", "llama-3-8b", "--hw", "h100-sxm",
                             "--batch", "1..64", "--context", "1..128k:4", "-q", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(p.stat().st_size > 0 for p in tmp_path.iterdir()):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.05)
    assert any(tmp_path.iterdir()), "the sweep never started writing"
    os.kill(proc.pid, signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM
    assert list(tmp_path.iterdir()) == []
