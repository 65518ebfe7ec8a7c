#!/usr/bin/env bash
# The harness's device path without a GPU: attnbench-bench with the CPU-backed test device
# registered (bench_device) checks a core case against fp64, then times it by the device's clock
# (manual time); the JSON carries the case and its time. And the real harness asked for the CUDA
# device where there is none refuses in one line, exit 2.
# Then `attnbench check` through the device path (attnbench_device), and `attnbench check --device
# cuda` where there is no GPU: one line, exit 2.
# usage: harness_device.sh BENCH_DEVICE ATTNBENCH_BENCH PYTHON WORKDIR ATTNBENCH_DEVICE ATTNBENCH
set -euo pipefail
bench=$1 real=$2 py=$3 work=$4 ab_dev=$5 ab=$6
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*"; exit 1; }

"$bench" --variant test-device --mode core --precision f32,bf16 --d-model 64 --heads 4 --seq 37 --causal 1 \
    --benchmark_min_time=0.01 --benchmark_out="$work/run.json" --benchmark_out_format=json \
    >"$work/stdout" 2>"$work/stderr" || fail "bench_device exited $?: $(cat "$work/stderr")"
"$py" - "$work/run.json" <<'PY' || fail "the JSON"
import json, sys
runs = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("run_type") == "iteration"]
assert len(runs) == 2, [b["name"] for b in runs]
for b in runs:
    assert "error_occurred" not in b, b.get("error_message")
    assert b["name"].endswith("/manual_time"), b["name"]  # timed by the device's clock
    assert b["real_time"] > 0 and b["iterations"] > 0, b
    label = json.loads(b["label"])
    assert label["variant"] == "test-device" and label["mode"] == "core" and label["part"] == "run", label
print("harness.device: 2 cases checked against fp64 and timed by the device's clock")
PY

# attnbench check through the device path: the test device's rows, every one within its bound
"$ab_dev" check --variant test-device --mode both --precision f32,bf16 --d-model 64 --heads 4 --seq 37 \
    >"$work/check.out" 2>"$work/check.err" || fail "check --variant test-device exited $?: $(cat "$work/check.err")"
rows=$(grep -c '^test-device .* pass ' "$work/check.out" || true)
[ "$rows" -eq 4 ] || fail "check --variant test-device: $rows passing core rows, not 4 (f32, bf16; causal or not): $(cat "$work/check.out")"
grep -q "refused, e.g. variant 'test-device': test-device runs core cases only, not layer" "$work/check.err" ||
    fail "the layer rows' refusal is not said: $(cat "$work/check.err")"

# the CUDA device where there is none (CI): one line naming why, exit 2
set +e
"$ab" check --device cuda --mode core >"$work/check_cuda.out" 2>"$work/check_cuda.err"
rc=$?
if [ $rc -ne 0 ]; then
    [ $rc -eq 2 ] || fail "check --device cuda without a GPU exited $rc, not 2: $(cat "$work/check_cuda.err")"
    [ "$(wc -l <"$work/check_cuda.err")" -eq 1 ] || fail "not one line: $(cat "$work/check_cuda.err")"
    grep -q "every case refused" "$work/check_cuda.err" || fail "check --device cuda: $(cat "$work/check_cuda.err")"
fi
"$real" --variant cuda-flash --device cuda --mode core --precision bf16 --d-model 64 --heads 4 --seq 37 \
    --benchmark_min_time=0.01 >"$work/cuda.out" 2>"$work/cuda.err"
rc=$?
set -e
if [ $rc -eq 0 ]; then
    echo "a usable GPU is here: the refusal is not tested"
    exit 0
fi
[ $rc -eq 2 ] || fail "--device cuda without a GPU exited $rc, not 2: $(cat "$work/cuda.err")"
[ "$(wc -l <"$work/cuda.err")" -eq 1 ] || fail "not one line: $(cat "$work/cuda.err")"
grep -q "cuda-flash" "$work/cuda.err" || fail "the line does not name the variant: $(cat "$work/cuda.err")"
echo "harness.device: --device cuda refused in one line: $(cat "$work/cuda.err")"
