#!/usr/bin/env bash
# Lease 2026-11-27e: issue 46's targets on the Xeon beside the H100 with the shares measured
# alongside (f724cd9): the core (core-roof-xeon.toml) and decode at DRAM sizes (--preset decode-roof).
set -u
T0=$(date +%s)
R=/tmp/o; mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
tar xJf .dev.tar.xz
source scripts/device.sh env
B=.dev/bin
nproc; grep -m1 "model name" /proc/cpuinfo; uname -r; uptime
grep -m1 flags /proc/cpuinfo | tr ' ' '\n' | grep -E "avx512|amx" | tr '\n' ' '; echo
lscpu | grep -iE "^(L1d|L2|L3|Socket|Core|Thread|NUMA node\(s\))"
step() { local name=$1 lim=$2; shift 2; echo "== $name (limit $lim s, at $(( $(date +%s) - T0 )) s)"; local t=$(date +%s)
  timeout $lim "$@" > $R/$name.txt 2>&1; local rc=$?; echo "rc=$rc $(( $(date +%s) - t )) s"; tail -n 4 $R/$name.txt; return $rc; }
step core_roof 170 $B/attnbench report --sweep .lease/core-roof-xeon.toml --out $R/core-roof
step decode_roof 250 $B/attnbench report --preset decode-roof --out $R/decode-roof
echo "total $(( $(date +%s) - T0 )) s"
cd /tmp && tar czf $OUT/out.tgz o && ls -la $OUT
