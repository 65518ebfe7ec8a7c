#!/usr/bin/env bash
# The CUDA peers on a machine with a GPU and torch (a lent H100 or H200, after
# `source scripts/device.sh env` there): one prepared call of a few minutes.
#   bash experiments/peers/cuda_check.sh BUILD    BUILD: the build whose ctest files and attnbench
#                                                 run (build/v4 as device.sh env lays it out)
# 1. the CUDA peers' tests (ctest -R '^peer\.': each CUDA provider on a tiny grid, judged against
#    fp64 and timed; the CUDA fault tests; the L2 flush and FlexAttention's masks on the CPU);
# 2. each CUDA provider timed on the shapes of shared/notes/h100-measured.md (bf16, d_head 128,
#    B x H >= 132; decode B 8, H 32, G 8, L 32k; FlexAttention at N 16k causal and windows of 1k
#    and 4k), one harness process per provider, every shape judged against fp64 first; the
#    medians, the backend, the kernels and whether tiles were skipped, one line per case.
# CUDA_CHECK_NO_JUDGE=1 times step 2 without judging (each N 16k shape's judgement draws and writes
# 6 GB of inputs; step 1 judged every provider on small shapes). Logs and JSON go to $OUT (the
# device tool's output folder) or build/gpu-out. Exit status: ctest's.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(cd "${1:?usage: cuda_check.sh BUILD}" && pwd)
out=${OUT:-$root/build/gpu-out}
py=${ATTNBENCH_PYTHON:-python3}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader || true
"$py" -c "import torch; print('torch', torch.__version__, torch.cuda.get_device_name(0))" || exit 2

(cd "$build" && timeout 300 ctest -R '^peer\.(torch-sdpa-|torch-flex|torch-mla\.cuda|cuda\.|table|masks)' \
  --output-on-failure) 2>&1 | tee "$out/peer-tests.txt"
status=${PIPESTATUS[0]}

# the timed shapes: (provider, case) pairs, one harness run per provider
"$py" - "$out/cuda-cases" <<'EOF'
import json, os, sys
d = sys.argv[1]
os.makedirs(d, exist_ok=True)
core = dict(mode="core", d_model=2048, heads=16, kv_heads=16, batch=9, threads=1, precision="bf16", device="cuda")
dec = dict(mode="decode", d_model=4096, heads=32, kv_heads=8, batch=8, context=32767, threads=1, precision="bf16",
           device="cuda")
sets = {p: [dict(core, variant=p, n_q=4096, causal=c) for c in (False, True)] + [dict(dec, variant=p)]
        for p in ("torch-sdpa-flash", "torch-sdpa-efficient", "torch-sdpa-cudnn")}
sets["torch-sdpa-math"] = [dict(core, variant="torch-sdpa-math", n_q=1024, causal=True)]
big = dict(core, batch=8, n_q=16384, causal=True)
sets["torch-flex"] = [dict(big, variant="torch-flex", window=w) for w in (0, 1024, 4096)]
sets["torch-sdpa-cudnn"].append(dict(big, variant="torch-sdpa-cudnn", window=1024))  # a mask: every pair scored
for p, cs in sets.items():
    with open(os.path.join(d, p + ".json"), "w") as f:
        json.dump(cs, f)
EOF
for f in "$out"/cuda-cases/*.json; do
  p=$(basename "$f" .json)
  timeout 300 "$py" "$root/experiments/peers/harness.py" --cases "$f" --attnbench "$build/attnbench" \
    ${CUDA_CHECK_NO_JUDGE:+--no-judge} \
    --benchmark_repetitions=5 --benchmark_min_time=0.05 --benchmark_out="$out/$p.json" 2>&1 | tail -n 30 >"$out/$p.log"
  echo "$p: exit ${PIPESTATUS[0]} (log $out/$p.log)"
done
"$py" - "$out" <<'EOF'
import glob, json, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "torch-*.json"))):
    for b in json.load(open(path))["benchmarks"]:
        if b.get("error_occurred"):
            print(f"{b['name']}: error: {b['error_message']}")
        elif b.get("aggregate_name") == "median":
            peer = json.loads(b["label"])["peer"]
            print(f"{b['run_name']}: median {b['real_time']:.3f} ms; {peer['backend']}; {peer['masking']}; "
                  f"skips tiles: {peer['skips_masked_tiles']}; {peer['kernel']}")
EOF
exit "$status"
