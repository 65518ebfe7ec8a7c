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

# decode on the device: the step's core alone (ID/core), checked against fp64 over the same cache,
# timed by the device's clock, its shares taken against the device's declared ceilings (the test
# device's nominal 1000 GFLOP/s and 100 GB/s), recomputed here from the bytes, FLOPs and time
"$bench" --variant test-device --mode core,decode --precision bf16 --d-model 64 --heads 4 --kv-heads 2 --seq 37 \
    --context 300 --benchmark_min_time=0.01 --benchmark_out="$work/decode.json" --benchmark_out_format=json \
    >"$work/decode.stdout" 2>"$work/decode.stderr" || fail "bench_device decode exited $?: $(cat "$work/decode.stderr")"
"$py" - "$work/decode.json" <<'PY' || fail "the decode JSON"
import json, sys
doc = json.load(open(sys.argv[1]))
runs = [b for b in doc["benchmarks"] if b.get("run_type") == "iteration"]
parts = sorted(json.loads(b["label"])["part"] for b in runs)
assert parts == ["core", "run"], [b["name"] for b in runs]  # no decode step, no CPU probes
assert doc["context"]["attnbench_peak_cpu_matmul_16bit_gflops"] == "1000.000000", doc["context"]
for b in runs:
    assert "error_occurred" not in b, b.get("error_message")
    assert b["name"].endswith("/manual_time") and b["time_unit"] == "ms", b["name"]
    s = b["real_time"] * 1e-3
    if json.loads(b["label"])["part"] == "core":
        gbs = b["kv_read_bytes"] * 1e-9 / s
        assert abs(b["kv_gbs"] - gbs) <= 1e-6 * gbs, (b["kv_gbs"], gbs)
        assert abs(b["pct_read"] - gbs) <= 1e-6 * gbs, (b["pct_read"], gbs)  # 100 GB/s: % = GB/s
        assert b["check_ratio"] <= 1, b["check_ratio"]
    else:
        g = b["flop_matmul"] * 1e-9 / s
        assert abs(b["pct_peak"] - g / 10) <= 1e-6 * g, (b["pct_peak"], g)  # 1000 GFLOP/s
print("harness.device: a decode core and a bf16 core timed on the device, shares of its ceilings")
PY

# MLA's absorbed decode on the device: one latent head of d_c + d_R = 36 keys per token whose
# values are their first d_c = 32 elements, stored once: the harness asks for the layer's step,
# the device reads the latent rows (values from the key rows) and the check holds it to fp64
mla='{"mode":"decode","variant":"test-device","d_model":64,"heads":4,"kv_heads":4,"d_head":20,"d_v":16,"kv_lora_rank":32,"q_lora_rank":0,"qk_rope_head_dim":4,"n_q":1,"context":300,"n_kv":301,"batch":2,"threads":1,"causal":false,"window":0,"bias":false,"magnitude":1.0,"precision":"bf16","family":"mla","form":"absorb","device":"cpu"}'
"$bench" --case "$mla" --benchmark_min_time=0.01 --benchmark_out="$work/mla.json" --benchmark_out_format=json \
    >"$work/mla.stdout" 2>"$work/mla.stderr" || fail "bench_device MLA decode exited $?: $(cat "$work/mla.stderr")"
"$py" - "$work/mla.json" <<'PY' || fail "the MLA decode JSON"
import json, sys
runs = [b for b in json.load(open(sys.argv[1]))["benchmarks"] if b.get("run_type") == "iteration"]
assert len(runs) == 1 and json.loads(runs[0]["label"])["part"] == "core", [b["name"] for b in runs]
b = runs[0]
assert "error_occurred" not in b, b.get("error_message")
# batch 2 x 301 tokens x (32 + 4) bf16 elements, the values read from the key rows: by hand
assert b["kv_read_bytes"] == 2 * 301 * 36 * 2, b["kv_read_bytes"]
assert 0 < b["check_ratio"] <= 1, b["check_ratio"]
print("harness.device: MLA's absorbed decode core over its latent cache, checked and timed on the device")
PY

# attnbench check through the device path: the test device's rows, every one within its bound
"$ab_dev" check --variant test-device --mode both --precision f32,bf16 --d-model 64 --heads 4 --seq 37 \
    >"$work/check.out" 2>"$work/check.err" || fail "check --variant test-device exited $?: $(cat "$work/check.err")"
rows=$(grep -c '^test-device .* pass ' "$work/check.out" || true)
[ "$rows" -eq 8 ] || fail "check --variant test-device: $rows passing rows, not 8 (core, layer; f32, bf16; causal or not): $(cat "$work/check.out")"
# a variant that stores the weights in bf16 and declares it: charged by check's half path, it passes
"$ab_dev" check --variant test-bf16-weights --mode core --precision bf16 --d-model 64 --heads 4 --kv-heads 2 \
    --seq 129 >"$work/check_weights.out" 2>"$work/check_weights.err" ||
    fail "check --variant test-bf16-weights exited $?: $(cat "$work/check_weights.out" "$work/check_weights.err")"
grep -q '^test-bf16-weights bf16 core .* pass ' "$work/check_weights.out" ||
    fail "check --variant test-bf16-weights: $(cat "$work/check_weights.out")"
# decode: the step's core over f32, bf16 and f16 caches of the decode grid (int8 refused)
"$ab_dev" check --variant test-device --mode decode --precision f32,bf16,f16,int8 \
    >"$work/check_decode.out" 2>"$work/check_decode.err" ||
    fail "check --mode decode --variant test-device exited $?: $(cat "$work/check_decode.err")"
for t in f32 bf16 f16; do
    n=$(grep -c "^test-device  *$t  *decode .* pass " "$work/check_decode.out" || true)
    [ "$n" -ge 10 ] || fail "check --mode decode: $n passing $t rows: $(cat "$work/check_decode.out")"
done
n=$(grep -c "^test-device .* pass .*MLA .* absorb L=300 prefill (the step's core)" "$work/check_decode.out" || true)
[ "$n" -ge 3 ] || fail "check --mode decode: $n passing MLA absorbed rows at L 300, not 3 (f32, bf16, f16)"
grep -c "^test-device .* FAIL" "$work/check_decode.out" >/dev/null && fail "a failing decode row: $(cat "$work/check_decode.out")"
grep -q "test-device stores f32, bf16 or f16, not int8" "$work/check_decode.err" ||
    fail "the int8 refusal is not said: $(cat "$work/check_decode.err")"

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
