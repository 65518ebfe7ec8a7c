#!/usr/bin/env bash
# Lease 2026-11-29, second call: bf16 decode on vdpbf16ps against the fp32 path (ATTNBENCH_BF16=
# convert) in alternating runs, then every CPU variant through the fp64 checker at 2 threads.
set -u
T0=$(date +%s)
DEADLINE=${DEADLINE:-260}
R=/tmp/o
mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
finish() { echo "total $(($(date +%s) - T0)) s"; cd /tmp && tar czf "$OUT/out2.tgz" o && ls -la "$OUT"; }
trap finish EXIT
tar xJf .dev.tar.xz
source scripts/device.sh env
B=.dev/bin
uptime
left() { echo $((DEADLINE - ($(date +%s) - T0))); }
for run in a1:dot b1:convert b2:convert a2:dot; do
    name=${run%%:*} eng=${run#*:}
    cap=$(left); [ "$cap" -gt 60 ] && cap=60
    [ "$cap" -lt 15 ] && { echo "== $name not started"; continue; }
    echo "== $name engine $eng (at $(($(date +%s) - T0)) s)"
    if [ "$eng" = convert ]; then export ATTNBENCH_BF16=convert; else unset ATTNBENCH_BF16; fi
    timeout "$cap" $B/attnbench report --sweep .lease/bf16-ab.toml --out $R/ab_$name >$R/ab_$name.txt 2>&1
    echo "rc=$?"; tail -2 $R/ab_$name.txt
done
unset ATTNBENCH_BF16
cap=$(left)
echo "== cpu check (limit $cap s)"
timeout "$cap" $B/attnbench check --mode all --precision all --threads 2 --out $R/cpu-check >$R/cpu_check.txt 2>&1
echo "rc=$?"; tail -c 300 $R/cpu_check.txt
for d in $R/*/; do [ -f "$d/perf.json" ] && rm -rf "$d/cases"; done
