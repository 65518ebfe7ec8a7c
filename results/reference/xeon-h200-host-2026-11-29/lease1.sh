#!/usr/bin/env bash
# Lease 2026-11-29 (H200 machine): issue 46 on the host CPU with the binaries of build/v4 (packed by
# scripts/device.sh pack build/v4), the CUDA variants' never-a-silent-NaN, the CPU and CUDA checkers.
# Every step under a timeout that ends before DEADLINE (seconds after the start); results in /tmp/o,
# tarred into $OUT at the end whatever happened.
set -u
T0=$(date +%s)
DEADLINE=${DEADLINE:-450}
R=/tmp/o
mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
finish() { echo "total $(($(date +%s) - T0)) s"; cd /tmp && tar czf "$OUT/out.tgz" o && ls -la "$OUT"; }
trap finish EXIT
tar xJf .dev.tar.xz
cudalibs=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
    $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
    -name 'libcublas.so.1[0-9]*' -o -name 'libcudart.so.1[0-9]*' 2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
export LD_LIBRARY_PATH="${cudalibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source scripts/device.sh env
B=.dev/bin
{
    nproc; grep -m1 "model name" /proc/cpuinfo; uname -r; uptime; free -g | head -2
    grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E "avx512|amx|avx2|fma|f16c" | tr '\n' ' '; echo
    lscpu | grep -iE "^(Model name|L1d|L2|L3|Socket|Core|Thread|NUMA node|CPU MHz|Vendor)"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
} >$R/machine.txt 2>&1
cat $R/machine.txt
step() { # step NAME CAP CMD...: CMD under min(CAP, time left), output to $R/NAME.txt
    local name=$1 cap=$2 left
    shift 2
    left=$((DEADLINE - ($(date +%s) - T0)))
    [ "$left" -lt "$cap" ] && cap=$left
    if [ "$cap" -lt 15 ]; then echo "== $name: not started ($left s left)"; return 0; fi
    echo "== $name (limit $cap s, at $(($(date +%s) - T0)) s)"
    local t=$(date +%s)
    timeout "$cap" "$@" >"$R/$name.txt" 2>&1
    local rc=$?
    echo "rc=$rc $(($(date +%s) - t)) s"
    tail -n 4 "$R/$name.txt"
}
# never a silent NaN on the GPU: finite inputs of 1e30 through the CUDA variants (issue 46)
nf=$R/nonfinite
mkdir -p $nf
$B/attnbench init --d-model 32 --heads 2 --seq 3 --bias --out $nf/data >/dev/null &&
    python3 -c "import sys, numpy as np; np.save(sys.argv[2], np.load(sys.argv[1]).astype(np.float64) * 1e30)" $nf/data/x.npy $nf/big.npy
for t in cuda-naive:cuda:f32 cuda-tiled:cuda:f32 cuda-flash:cuda:bf16 naive:cpu:f32; do
    IFS=: read -r v dev p <<<"$t"
    echo "== run --variant $v --precision $p on |x| ~ 1e30"
    timeout 30 $B/attnbench run --device $dev --variant $v --precision $p \
        --weights $nf/data/weights --input $nf/big.npy --heads 2 --out $nf/y_$v.npy
    echo "rc=$? output written: $([ -e $nf/y_$v.npy ] && echo yes || echo no)"
done
step attn_tests 60 $B/attn_tests "[halves],[bf16dots],[int8dots],[precision],[mutants],[decode],[kv],[mla]"
step core_roof 110 $B/attnbench report --sweep .lease/core-roof-xeon.toml --out $R/core-roof
step decode_xl 260 $B/attnbench report --preset decode-roof-xl --out $R/decode-xl
step cpu_check 60 $B/attnbench check --mode all --precision all --threads 16 --out $R/cpu-check
step cuda_check 90 $B/attnbench check --device cuda --mode all --precision f32,bf16,f16,int8 --out $R/cuda-check
for d in $R/*/; do [ -f "$d/perf.json" ] && rm -rf "$d/cases"; done # perf.json holds every finished row
