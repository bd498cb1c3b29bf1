#!/usr/bin/env bash
# The GPU run: calibrate, bench --suite full (each case checked against its reference before it is
# timed), efficiency fit, end-to-end layer, validate, then the kernels' reference-pair tests on the
# GPU. Runs from the source tree (PYTHONPATH=., python3; no install, no network, no plotly) and
# finishes in under 8 minutes on one H200: every stage has its own `timeout`, and a
# stage that fails or times out does not stop the others (bench checkpoints after each case).
#
#   scripts/gpu_suite.sh [OUT_DIR]        # default: $OUT, else ./gpu_suite_out
#
# Stages, in order: calibrate, bench, fit, e2e, validate, tests. Exit 0 when all passed, 1 when any
# failed or timed out, 2 without a GPU.
# Writes under OUT_DIR: results.json (bench + extra.end_to_end), measured_spec.toml (measured
# ceilings + fitted efficiency), validation.json, validation.md, summary.txt, stages.tsv, logs/.
# Without a CUDA GPU it prints one line and exits 2. Stage budgets (seconds) can be overridden
# through the environment: T_CALIBRATE, T_BENCH, T_FIT, T_E2E, T_VALIDATE, T_TESTS; the tests'
# pytest -k filter through GPU_SUITE_TEST_FILTER.
set -u

OUT_DIR="${1:-${OUT:-gpu_suite_out}}"
case "$OUT_DIR" in /*) ;; *) OUT_DIR="$PWD/$OUT_DIR" ;; esac  # relative to where it was called from
cd "$(dirname "$0")/.." || exit 2
PY="${PYTHON:-python3}"
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1

# GPU_SUITE_CPU_DRYRUN=1 (tests only): the same stages on the CPU under the Triton interpreter, on
# the kernels' tiny "test" cases (GPU_SUITE_KERNELS, default copy) and a tiny layer; no GPU check,
# no kernel-test stage. It checks the plumbing, not the GPU.
DRY="${GPU_SUITE_CPU_DRYRUN:-0}"
T_BENCH=${T_BENCH:-210}
if [ "$DRY" = 1 ]; then
    export TRITON_INTERPRET=1
    CAL_ARGS=(--device cpu --base h200)
    BENCH_ARGS=(--device cpu --suite test --hw h200 --kernel "${GPU_SUITE_KERNELS:-copy}")
    E2E_ARGS=(--device cpu --tiny --hw h200)
else
    CAL_ARGS=()
    # the full suite stops starting new cases 30 s before its own budget ends
    BENCH_ARGS=(--suite full --target-ms 150 --time-budget-s $((T_BENCH - 30)))
    [ -n "${GPU_SUITE_KERNELS:-}" ] && BENCH_ARGS+=(--kernel "$GPU_SUITE_KERNELS")
    E2E_ARGS=()
fi

# ---- a GPU first ----------------------------------------------------------------------------------
if [ "$DRY" = 1 ]; then
    gpu_line="CPU dry run (Triton interpreter), not a GPU measurement"
elif ! gpu_line=$("$PY" -c '
import sys
try:
    import torch
except Exception as e:
    print(f"gpu_suite: no CUDA GPU found: torch does not import ({type(e).__name__}); nothing was run"); sys.exit(2)
if not torch.cuda.is_available():
    print("gpu_suite: no CUDA GPU found (torch.cuda.is_available() is False); nothing was run"); sys.exit(2)
print(torch.cuda.get_device_name(0))
' 2>/dev/null); then
    echo "${gpu_line:-gpu_suite: no CUDA GPU found (python3 with torch failed to run); nothing was run}" >&2
    exit 2
fi

mkdir -p "$OUT_DIR/logs" || exit 2
RESULTS="$OUT_DIR/results.json"
SPEC="$OUT_DIR/measured_spec.toml"
STAGES="$OUT_DIR/stages.tsv"
printf 'stage\tstatus\tseconds\n' >"$STAGES"
T0=$(date +%s)
echo "gpu_suite: $gpu_line; output in $OUT_DIR"

# run_stage NAME BUDGET_S CMD...: log to logs/NAME.log, record status and duration, never abort
run_stage() {
    local name=$1 budget=$2
    shift 2
    local t=$(date +%s) rc status
    echo "== $name (budget ${budget}s): $*"
    timeout -k 10 "$budget" "$@" >"$OUT_DIR/logs/$name.log" 2>&1
    rc=$?
    case $rc in
        0) status=ok ;;
        124 | 137) status="timeout(${budget}s)" ;;
        *) status="failed(rc=$rc)" ;;
    esac
    printf '%s\t%s\t%s\n' "$name" "$status" "$(($(date +%s) - t))" >>"$STAGES"
    echo "   $status in $(($(date +%s) - t)) s; tail of logs/$name.log:"
    tail -n 4 "$OUT_DIR/logs/$name.log" | sed 's/^/   | /'
    return 0
}

R="$PY -m rooflinecli"

# 1. measured ceilings -> spec file
run_stage calibrate "${T_CALIBRATE:-45}" $R calibrate --out "$SPEC" "${CAL_ARGS[@]}"
MEASURED=()
[ -f "$SPEC" ] && MEASURED=(--measured "$SPEC")

# 2. the full suite: correctness check, then ours and the torch baseline timed, per case
run_stage bench "$T_BENCH" $R bench --out "$RESULTS" "${BENCH_ARGS[@]}" "${MEASURED[@]}"

# 3. fitted efficiency into the measured spec (the e2e check then predicts with it too)
if [ -f "$RESULTS" ] && [ -f "$SPEC" ]; then
    run_stage fit "${T_FIT:-20}" $R calibrate --from-results "$RESULTS" --measured "$SPEC" --out "$SPEC"
fi

# 4. one decoder layer end to end (adds extra.end_to_end to the results; creates them if bench failed)
run_stage e2e "${T_E2E:-60}" $R e2e --results "$RESULTS" "${E2E_ARGS[@]}" "${MEASURED[@]}"

# 5. validation (its "fitted" column is fitted leave-one-shape-out, so it stays honest)
if [ -f "$RESULTS" ]; then
    run_stage validate "${T_VALIDATE:-20}" $R validate "$RESULTS" "${MEASURED[@]}" --out "$OUT_DIR/validation.json" --markdown "$OUT_DIR/validation.md"
fi

# 6. the kernels' reference-pair tests on the GPU, last: bench has already checked every case it
# timed against its reference, so these odd-shape tests add coverage, not a gate, and a cold Triton
# cache makes them slow (each test shape autotunes, and their odd sizes share no compiled variant
# with bench's). Only the reference pairs, split-K and paged paths (-k), no -x (one failure must not
# hide the other kernels); what the budget leaves untested shows in the log.
tests=()
for k in copy rmsnorm gemm flash_attention naive_attention decode_attention mla_decode moe; do
    [ -f "tests/test_$k.py" ] && tests+=("tests/test_$k.py")
done
TEST_ARGS=(-q -p no:cacheprovider -rf --tb=line -k "${GPU_SUITE_TEST_FILTER:-matches_reference or split_k or paged}")
[ "$DRY" = 1 ] && TEST_ARGS+=(--collect-only)  # the dry run checks the command line, runs nothing
if [ ${#tests[@]} -gt 0 ]; then
    run_stage tests "${T_TESTS:-75}" "$PY" -m pytest "${tests[@]}" "${TEST_ARGS[@]}"
else
    printf 'tests\tno test files\t0\n' >>"$STAGES"
fi

# ---- short summary, last ---------------------------------------------------------------------------
"$PY" - "$OUT_DIR" "$(($(date +%s) - T0))" <<'EOF' | tee "$OUT_DIR/summary.txt"
import json, sys
from pathlib import Path

out, total = Path(sys.argv[1]), sys.argv[2]
print(f"\ngpu_suite summary ({total} s), {out}")
for line in (out / "stages.tsv").read_text().splitlines()[1:]:
    name, status, secs = line.split("\t")
    print(f"  {name:<10} {status:<16} {secs:>4} s")
v = out / "validation.json"
if not v.is_file():
    print("  no validation.json")
    sys.exit(0)
d = json.loads(v.read_text())
pct = lambda x: "-" if x is None else f"{x * 100:.1f}%"
print(f"  GPU {d['gpu_name']}; specs {d['datasheet_spec']} / {d['measured_spec']}")
for basis, s in d["summary"].items():
    o = s["overall"]
    print(f"  kernels vs {basis:<9}: median |err| {pct(o['median_abs_error'])}, p90 {pct(o['p90_abs_error'])} (n {o['n']})")
for p in d.get("end_to_end", []):
    print(f"  e2e {p['phase']:<7}: measured {p['measured_s'] * 1e6:.1f} us, err datasheet {pct(p.get('error_datasheet'))}, measured {pct(p.get('error_measured'))}, fitted {pct(p.get('error_fitted'))}")
for t in d["targets"]:
    val = "-" if t["value"] is None else f"{t['value']:.2f}"
    print(f"  target {t['name']:<20} {t['status']:<12} {val:>6}  {t['detail']}")
print(f"  flags: {len(d['flags'])}; failed checks: {len(d['failed'])}")
EOF
# exit 1 when any stage failed or timed out (its outputs, and the others', are kept)
if tail -n +2 "$STAGES" | cut -f2 | grep -qv '^ok'; then exit 1; fi
exit 0
