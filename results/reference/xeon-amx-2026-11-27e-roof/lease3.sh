#!/usr/bin/env bash
# Lease 2026-11-27e, third call: the fp32 core's tile shapes on AVX-512 (simd, 1 thread, d_head 64
# and 128, N 1024 and 2048), forward then reverse, each row with its share of the peak alongside.
set -u
T0=$(date +%s)
R=/tmp/o; mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
tar xJf .dev.tar.xz
source scripts/device.sh env
B=.dev/bin
uptime
timeout 60 $B/attnbench peak --repetitions 5 --out $R > $R/peak.txt 2>&1; echo "peak rc=$?"; tail -3 $R/peak.txt
shape() { local q=$1 k=$2 pass=$3
  timeout 40 $B/attnbench-bench --peak $R/peak.json --mode core --variant simd --precision f32 --d-model 512,1024 --heads 8 --seq 1024,2048 --threads 1 --tile-q $q --tile-kv $k --benchmark_min_time=0.1 --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true --benchmark_out=$R/t${q}x${k}_$pass.json --benchmark_out_format=json --benchmark_format=console > /dev/null 2>&1
  echo "$pass ${q}x${k} rc=$? at $(( $(date +%s) - T0 )) s"; }
S="384:128 384:256 192:128 192:256 768:128 96:128 384:64"
for s in $S; do shape ${s%:*} ${s#*:} a; done
for s in $(echo $S | tr ' ' '\n' | tac); do shape ${s%:*} ${s#*:} b; done
echo "total $(( $(date +%s) - T0 )) s"
cd /tmp && tar czf $OUT/out.tgz o && ls -la $OUT
