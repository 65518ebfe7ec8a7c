#!/usr/bin/env bash
# Lease 2026-11-27e, second call: decode at DRAM sizes on the Xeon (decode-dram-xeon.toml).
set -u
T0=$(date +%s)
R=/tmp/o; mkdir -p $R
exec > >(tee $R/log.txt) 2>&1
tar xJf .dev.tar.xz
source scripts/device.sh env
B=.dev/bin
uptime
timeout 230 $B/attnbench report --sweep .lease/decode-dram-xeon.toml --out $R/decode-dram > $R/decode_dram.txt 2>&1; echo "rc=$? $(( $(date +%s) - T0 )) s"
tail -n 5 $R/decode_dram.txt
cd /tmp && tar czf $OUT/out.tgz o && ls -la $OUT
