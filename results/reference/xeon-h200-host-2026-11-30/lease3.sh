#!/usr/bin/env bash
# Lease 2026-11-30 (H200 machine): d449f69's v4 binaries (scripts/device.sh pack build/v4). The
# CUDA checker and a memcheck of it, the decode tests and checker on the host Xeon with the new
# int8 byte quads and the f16 two-block shape, then decode-roof-xl at 16 threads. Every step under
# a timeout ending before DEADLINE; results in /tmp/o, tarred into $OUT whatever happened.
set -u
T0=$(date +%s)
DEADLINE=${DEADLINE:-420}
R=/tmp/o
mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
finish() { echo "total $(($(date +%s) - T0)) s"; cd /tmp && tar czf "$OUT/out3.tgz" o && ls -la "$OUT"; }
trap finish EXIT
tar xJf .dev.tar.xz
cudalibs=$(find /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib /usr/lib/x86_64-linux-gnu \
    $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null) \
    -name 'libcublas.so.1[0-9]*' -o -name 'libcudart.so.1[0-9]*' 2>/dev/null | xargs -r -n1 dirname | sort -u | paste -sd:)
export LD_LIBRARY_PATH="${cudalibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
source scripts/device.sh env
B=.dev/bin
{
    nproc; grep -m1 "model name" /proc/cpuinfo; uptime
    grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E "avx512|amx" | tr '\n' ' '; echo
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
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
    tail -n 3 "$R/$name.txt" | cut -c1-300
}
step cuda_check 40 $B/attnbench check --device cuda --mode all --precision f32,bf16,f16,int8 --out $R/cuda-check
step cuda_memcheck 60 compute-sanitizer --tool memcheck --error-exitcode 99 $B/attnbench check --device cuda --mode decode --precision f32,bf16 --out $R/cuda-memcheck
step attn_tests 50 $B/attn_tests "[int8dots],[decode],[kv],[mutants],[halves]"
step cpu_check 50 $B/attnbench check --mode decode --precision all --threads 2 --out $R/cpu-check
step decode_xl 250 $B/attnbench report --preset decode-roof-xl --out $R/decode-xl
for d in $R/*/; do [ -f "$d/perf.json" ] && rm -rf "$d/cases"; done
