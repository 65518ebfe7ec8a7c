#!/usr/bin/env bash
# Lease 2026-11-27b: the bf16 core's fused softmax passes on the Xeon (AMX, vdpbf16ps): tests, check,
# old (5d86b85) against new in alternating runs, torch-sdpa beside.
set -u
T0=$(date +%s)
R=/tmp/o; mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
tar xJf .dev.tar.xz
source scripts/device.sh env
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site
B=.dev/bin; O=.lease/old
nproc; grep -m1 "model name" /proc/cpuinfo; uptime
step() { local name=$1 lim=$2; shift 2; echo "== $name (limit $lim s, at $(( $(date +%s) - T0 )) s)"; local t=$(date +%s)
  timeout $lim "$@" > $R/$name.txt 2>&1; local rc=$?; echo "rc=$rc $(( $(date +%s) - t )) s"; tail -n 4 $R/$name.txt; return $rc; }
step t_bf16dot 60 $B/attn_tests "[bf16dot]"
step t_halves 70 $B/attn_tests "[halves]"
step check_amx 30 $B/attnbench check --variant simd,parallel --precision bf16 --mode core
ATTNBENCH_BF16=dot step check_dot 30 $B/attnbench check --variant simd,parallel --precision bf16 --mode core
args="--mode core --variant simd --precision f32,bf16 --d-model 512,1024 --heads 8 --seq 1024,4096 --threads 1 --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true --benchmark_format=console"
for r in 1 2; do step ab_old_$r 50 $O/attnbench-bench $args; step ab_new_$r 50 $B/attnbench-bench $args; done
dargs="--mode core --variant simd --precision bf16 --d-model 512 --heads 8 --seq 1024,2048 --threads 1 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=console"
ATTNBENCH_BF16=dot step dot_old 30 $O/attnbench-bench $dargs
ATTNBENCH_BF16=dot step dot_new 30 $B/attnbench-bench $dargs
step par_new 40 $B/attnbench-bench --mode core --variant parallel --precision f32,bf16 --d-model 512,1024 --heads 8 --seq 1024,4096 --threads 16 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=console
step peers 170 $B/attnbench report --sweep .lease/bf16peers3.toml --out $R/peers
echo "total $(( $(date +%s) - T0 )) s"
cd /tmp && tar czf $OUT/out.tgz o; ls -la $OUT
