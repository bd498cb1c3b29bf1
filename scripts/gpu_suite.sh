#!/usr/bin/env bash
# The GPU run, from the source tree (PYTHONPATH=., python3; no install, no network, no plotly):
#
#   calibrate   measured ceilings (burst and sustained) + the op-grid calibration file (cuBLAS,
#               SDPA, elementwise, copies, launch floor), graph-timed: what the achievable model fits
#   e2e_*       whole-model decode steps (one CUDA graph each) and eager prefill for llama-3-8b,
#               qwen2.5-7b, a reduced-layer llama-3-70b and qwen3-30b-a3b (MoE) (torch ops; our
#               Triton kernels for 8b)
#   tune        roofline tune on the quick suite: graph-timed, interleaved, committed as JSON
#   gate_*      the same kernel subset benched twice and `regress` between the two runs: the gate's
#               false-alarm rate on an unchanged commit (it should report 0 regressions)
#   bench       the full kernel suite (each case checked against its reference before it is timed),
#               graph-timed GPU time + host us per call, fastest torch baseline, do_bench_cudagraph
#               cross-check, with the tuned configs (within what a deadline leaves)
#   validate    predicted vs measured: kernels, and whole-model roof / measured roof / achievable
#   moe_align   the MoE alignment kernels alone, one-program and multi-program, per shape
#   tests       the kernels' reference-pair tests on the GPU (coverage, not a gate: bench has
#               already checked every case it timed)
#
#   scripts/gpu_suite.sh [OUT_DIR] [--out OUT_DIR] [--deadline-s SECONDS]
#
# OUT_DIR defaults to ./gpu_suite_out. Every stage has its own budget (seconds; override with
# T_<STAGE>). With a deadline (--deadline-s, or GPU_SUITE_DEADLINE_S; none by default) a stage gets
# at most what is left of it, and a stage with under 10 s left is skipped. A stage that fails or times out does not stop the others
# (bench and calibrate checkpoint as they go). After every stage the output folder is packed into
# OUT_DIR/../<name>.tar.gz when GPU_SUITE_TAR is set (so a run cut short still returns its files).
# Exit 0 when every stage passed, 1 when any failed, timed out or was skipped, 2 without a GPU.
# Writes under OUT_DIR: measured_spec.toml + measured_spec.calibration.json, results.json,
# e2e.json, tuned/<gpu>-triton<version>.json, gate-run{1,2}.json + gate-regress.{json,md},
# validation.{json,md}, validation-e2e.{json,md}, moe_align_time.json, tune-report.json, environment.txt, summary.txt,
# stages.tsv, logs/.
set -u

OUT_DIR=gpu_suite_out
DEADLINE=${GPU_SUITE_DEADLINE_S:-0}  # seconds for the whole run; 0: no deadline
while [ $# -gt 0 ]; do
    case "$1" in
        --out) OUT_DIR=${2:?"gpu_suite: --out needs a folder"}; shift 2 ;;
        --out=*) OUT_DIR=${1#--out=}; shift ;;
        --deadline-s) DEADLINE=${2:?"gpu_suite: --deadline-s needs seconds"}; shift 2 ;;
        --deadline-s=*) DEADLINE=${1#--deadline-s=}; shift ;;
        -h | --help) sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        -*) echo "gpu_suite: unknown option '$1' (options: --out DIR, --deadline-s SECONDS)" >&2; exit 2 ;;
        *) OUT_DIR=$1; shift ;;
    esac
done
case "$DEADLINE" in '' | *[!0-9]*) echo "gpu_suite: --deadline-s must be a whole number of seconds, got '$DEADLINE'" >&2; exit 2 ;; esac
case "$OUT_DIR" in /*) ;; *) OUT_DIR="$PWD/$OUT_DIR" ;; esac  # relative to where it was called from
cd "$(dirname "$0")/.." || exit 2
PY="${PYTHON:-python3}"
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1

# GPU_SUITE_CPU_DRYRUN=1 (tests only): the same stages on the CPU under the Triton interpreter, on
# the kernels' tiny "test" cases (GPU_SUITE_KERNELS, default copy) and tiny models; no GPU check,
# no tune (it needs a GPU), no kernel-test run. It checks the plumbing, not the GPU.
DRY="${GPU_SUITE_CPU_DRYRUN:-0}"
if [ "$DRY" = 1 ]; then
    export TRITON_INTERPRET=1
    CAL_ARGS=(--device cpu --base h200)
    BENCH_ARGS=(--device cpu --suite test --hw h200 --kernel "${GPU_SUITE_KERNELS:-copy}")
    GATE_ARGS=(--device cpu --suite test --hw h200 --kernel "${GPU_SUITE_KERNELS:-copy}" --quiet)
    E2E_ARGS=(--device cpu --tiny --hw h200)
else
    CAL_ARGS=(--budget-s "${CAL_GRID_S:-75}")
    BENCH_ARGS=(--suite "${GPU_SUITE_BENCH_SUITE:-full}" --target-ms 100 --crosscheck)
    [ -n "${GPU_SUITE_KERNELS:-}" ] && BENCH_ARGS+=(--kernel "$GPU_SUITE_KERNELS")
    [ -n "${GPU_SUITE_SHAPES:-}" ] && BENCH_ARGS+=(--shape "$GPU_SUITE_SHAPES")  # e.g. 'M128-*,T*-E128-*'
    GATE_ARGS=(--suite quick --kernel "${GPU_SUITE_GATE_KERNELS:-copy,rmsnorm,gemm,decode_attention}" --target-ms 60 --quiet)
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

mkdir -p "$OUT_DIR/logs" "$OUT_DIR/tuned" || exit 2
RESULTS="$OUT_DIR/results.json"
E2E="$OUT_DIR/e2e.json"  # whole-model runs: their own results file (bench writes results.json anew)
SPEC="$OUT_DIR/measured_spec.toml"
STAGES="$OUT_DIR/stages.tsv"
printf 'stage\tstatus\tseconds\n' >"$STAGES"
T0=$(date +%s)
if [ "$DEADLINE" -gt 0 ]; then deadline_note="deadline ${DEADLINE}s"; else deadline_note="no deadline"; fi
echo "gpu_suite: $gpu_line; output in $OUT_DIR; $deadline_note"
{
    date -u +%Y-%m-%dT%H:%M:%SZ
    # the device copy of a working tree may carry stale git metadata: the caller can name the commit
    echo "commit ${GPU_SUITE_COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo unknown)}"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,temperature.gpu,pstate --format=csv
    "$PY" -c 'import sys, torch, triton; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "triton", triton.__version__)' 2>&1
} >"$OUT_DIR/environment.txt" 2>&1

pack() {  # keep a packed copy beside OUT_DIR up to date (GPU_SUITE_TAR=path.tar.gz)
    # (never the archive itself, should GPU_SUITE_TAR lie inside OUT_DIR)
    [ -n "${GPU_SUITE_TAR:-}" ] && tar czf "$GPU_SUITE_TAR.tmp" --exclude="$(basename "$GPU_SUITE_TAR")*" -C "$(dirname "$OUT_DIR")" "$(basename "$OUT_DIR")" 2>/dev/null \
        && mv -f "$GPU_SUITE_TAR.tmp" "$GPU_SUITE_TAR"
    return 0
}

# run_stage NAME BUDGET_S CMD...: log to logs/NAME.log, record status and duration, never abort;
# with a deadline, the budget is cut to what it leaves (minus 15 s for the summary)
run_stage() {
    local name=$1 budget=$2
    shift 2
    if [ "$DEADLINE" -gt 0 ]; then
        local left=$((DEADLINE - ($(date +%s) - T0) - 15))
        [ "$left" -lt "$budget" ] && budget=$left
    fi
    if [ "$budget" -lt 10 ]; then
        printf '%s\t%s\t0\n' "$name" "skipped(deadline)" >>"$STAGES"
        echo "== $name: skipped, the run's ${DEADLINE}s deadline is near"
        return 0
    fi
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
    pack
    return 0
}

left_s() {  # left_s WANT RESERVE: WANT, or what the deadline (if any) leaves after RESERVE more seconds
    [ "$DEADLINE" -gt 0 ] || { echo "$1"; return; }
    local left=$((DEADLINE - ($(date +%s) - T0) - 15 - $2))
    [ "$left" -lt "$1" ] && echo "$left" || echo "$1"
}

R="$PY -m rooflinecli"

# 1. measured ceilings (burst + sustained) and the op grid -> spec file + calibration file
run_stage calibrate "${T_CALIBRATE:-110}" $R calibrate --out "$SPEC" "${CAL_ARGS[@]}"
MEASURED=()
[ -f "$SPEC" ] && MEASURED=(--measured "$SPEC")

# 2. whole models: decode steps in one CUDA graph each, eager prefill (e2e.json, extra.end_to_end_full)
# (llama-3-8b's Triton points compile and tune the 8b GEMM keys on a cold cache)
run_stage e2e_llama8b "${T_E2E_8B:-90}" $R e2e --full --model llama-3-8b --results "$E2E" --budget-s 25 "${E2E_ARGS[@]}" "${MEASURED[@]}"
run_stage e2e_qwen7b "${T_E2E_QWEN:-35}" $R e2e --full --model qwen2.5-7b --results "$E2E" --budget-s 12 --no-triton "${E2E_ARGS[@]}" "${MEASURED[@]}"
run_stage e2e_llama70b "${T_E2E_70B:-40}" $R e2e --full --model llama-3-70b --results "$E2E" --budget-s 15 --no-triton "${E2E_ARGS[@]}" "${MEASURED[@]}"
# (an MoE model: routing + torch._grouped_mm experts, 61 GB of weights, 46-47 of 48 layers built; validates the moe_grouped fit)
run_stage e2e_qwen3moe "${T_E2E_MOE:-40}" $R e2e --full --model qwen3-30b-a3b --results "$E2E" --budget-s 15 --no-triton "${E2E_ARGS[@]}" "${MEASURED[@]}"

# 3. tuned configs for the quick suite's keys (bench then runs them without re-tuning)
if [ "$DRY" = 1 ]; then
    printf 'tune\tskipped(cpu)\t0\n' >>"$STAGES"
else
    T_TUNE=${T_TUNE:-75}
    run_stage tune "$T_TUNE" $R tune --suite quick --time-budget-s $((T_TUNE - 25)) --out "$OUT_DIR/tuned" --report "$OUT_DIR/tune-report.json" --quiet
fi

# 4. the gate on an unchanged commit: one subset benched twice, regress between the runs
run_stage gate_run1 "${T_GATE:-35}" $R bench --out "$OUT_DIR/gate-run1.json" --tuned "$OUT_DIR/tuned" "${GATE_ARGS[@]}"
run_stage gate_run2 "${T_GATE:-35}" $R bench --out "$OUT_DIR/gate-run2.json" --tuned "$OUT_DIR/tuned" "${GATE_ARGS[@]}"
if [ -f "$OUT_DIR/gate-run1.json" ] && [ -f "$OUT_DIR/gate-run2.json" ]; then
    # regress's exit 1 (a regression between two runs of one commit) is the false alarm this stage
    # measures, counted in the summary, not a failure of the stage; exit 2 (an error) is
    run_stage gate_regress 20 bash -c '"$@"; rc=$?; [ $rc -le 1 ]' gate $R regress "$OUT_DIR/gate-run1.json" "$OUT_DIR/gate-run2.json" \
        --impl all --json "$OUT_DIR/gate-regress.json" --markdown "$OUT_DIR/gate-regress.md"
fi

# 5. the full suite: check, then ours and the fastest torch baseline graph-timed, per case
# (bench stops starting cases 35 s before its budget ends; the budget leaves 20 s for validation)
T_BENCH=$(left_s "${T_BENCH:-200}" 20)
run_stage bench "$T_BENCH" $R bench --out "$RESULTS" --time-budget-s $((T_BENCH > 45 ? T_BENCH - 35 : 10)) --tuned "$OUT_DIR/tuned" "${BENCH_ARGS[@]}" "${MEASURED[@]}"

# 6. validation: whole models (roof, measured roof, achievable), then kernels
if [ -f "$E2E" ]; then
    run_stage validate_e2e "${T_VALIDATE:-25}" $R validate "$E2E" "${MEASURED[@]}" --out "$OUT_DIR/validation-e2e.json" --markdown "$OUT_DIR/validation-e2e.md"
fi
if [ -f "$RESULTS" ]; then
    run_stage validate "${T_VALIDATE:-25}" $R validate "$RESULTS" "${MEASURED[@]}" --out "$OUT_DIR/validation.json" --markdown "$OUT_DIR/validation.md"
fi

# 7. the MoE alignment alone, both paths (one program, multi-program) at decode and prefill sizes:
# where the prefill layer's time goes (diagnostic, about 30 s, mostly compiling)
if [ "$DRY" = 1 ]; then
    printf 'moe_align\tskipped(cpu)\t0\n' >>"$STAGES"
else
    run_stage moe_align "${T_MOE_ALIGN:-40}" "$PY" scripts/moe_align_time.py --out "$OUT_DIR/moe_align_time.json"
fi

# 8. the kernels' reference-pair tests on the GPU, last (coverage; bench already checked each case)
tests=()
for k in kernels_reference copy rmsnorm gemm flash_attention naive_attention decode_attention mla_decode moe; do
    [ -f "tests/kernels/test_$k.py" ] && tests+=("tests/kernels/test_$k.py")
done
TEST_ARGS=(-q -p no:cacheprovider -rf --tb=line -k "${GPU_SUITE_TEST_FILTER:-matches_reference or split_k or paged}")
[ "$DRY" = 1 ] && TEST_ARGS+=(--collect-only)  # the dry run checks the command line, runs nothing
if [ ${#tests[@]} -gt 0 ]; then
    run_stage tests "${T_TESTS:-60}" "$PY" -m pytest "${tests[@]}" "${TEST_ARGS[@]}"
fi

# ---- short summary, last ---------------------------------------------------------------------------
"$PY" -m rooflinecli.bench.suite_summary "$OUT_DIR" "$(($(date +%s) - T0))" | tee "$OUT_DIR/summary.txt"
pack
# exit 1 when any stage failed, timed out or was skipped (its outputs, and the others', are kept)
if tail -n +2 "$STAGES" | cut -f2 | grep -v '^skipped(cpu)' | grep -qv '^ok'; then exit 1; fi
exit 0
