#!/usr/bin/env bash
# Lease 2026-11-27d: the fused bf16 softmax step's test by hand on AVX512_BF16 hardware, and old (5d86b85)
# against new (this tree) pinned to one core, alternating, plus the default tiles against 384 x 256.
set -u
T0=$(date +%s)
R=/tmp/o; mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
tar xJf .dev.tar.xz
source scripts/device.sh env
B=.dev/bin; O=.lease/old
uptime; grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E "avx512|amx" | tr '\n' ' '; echo
timeout 60 $B/attn_tests "[bf16dot]" -s > $R/t_bf16dot.txt 2>&1; echo "t_bf16dot rc=$?"; grep -E "passed|failed|WARN" $R/t_bf16dot.txt | tail -3
timeout 60 $B/attn_tests "[halves]" > $R/t_halves.txt 2>&1; echo "t_halves rc=$?"; tail -2 $R/t_halves.txt
bench() { local tag=$1 bin=$2; shift 2; echo "== $tag at $(( $(date +%s) - T0 )) s"
  timeout 40 taskset -c 5 $bin --mode core --variant simd --precision bf16 --d-model 512,1024 --heads 8 --seq 2048 --threads 1 --benchmark_min_time=0.3 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=console "$@" 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E "_median|rror" | awk -v t=$tag '{print t, $1, $2, $3}'; }
for r in 1 2 3 4; do bench old_$r $O/attnbench-bench; bench new_$r $B/attnbench-bench; done
for r in 1 2 3; do bench t384x128_$r $B/attnbench-bench --tile-q 384 --tile-kv 128; bench t384x256_$r $B/attnbench-bench --tile-q 384 --tile-kv 256; done
echo "total $(( $(date +%s) - T0 )) s"
cp $R/*.txt $OUT/
