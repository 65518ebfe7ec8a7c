#!/usr/bin/env bash
# Lease 2026-11-27c: the bf16 (AMX) core's tile shapes on the Xeon, simd 1 thread, N 2048, each shape twice (forward, then reversed order).
set -u
T0=$(date +%s)
R=/tmp/o; mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
tar xJf .dev.tar.xz
source scripts/device.sh env
B=.dev/bin
uptime
shapes="64x128 64x256 64x512 128x128 128x256 128x512 192x128 192x256 384x128 384x256 384x512 768x256"
rev=$(echo $shapes | tr ' ' '\n' | tac | tr '\n' ' ')
for s in $shapes $rev; do
  q=${s%x*}; k=${s#*x}
  echo "== $s at $(( $(date +%s) - T0 )) s"
  timeout 30 $B/attnbench-bench --mode core --variant simd --precision bf16 --d-model 512,1024 --heads 8 --seq 2048 --threads 1 --tile-q $q --tile-kv $k --benchmark_min_time=0.2 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true --benchmark_format=console 2>&1 | sed 's/\x1b\[[0-9;]*m//g' | grep -E "_median|rror" | awk -v s=$s '{print s, $1, $2, $3}'
  [ $(( $(date +%s) - T0 )) -gt 200 ] && { echo "stopped at 200 s"; break; }
done
echo "total $(( $(date +%s) - T0 )) s"
cp $R/log.txt $OUT/
