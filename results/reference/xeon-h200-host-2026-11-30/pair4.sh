#!/usr/bin/env bash
# int8 scores on byte quads against the 16-bit rows (AB_NOQ=1, a measuring build only) on the
# H200 machine's Xeon, 16 threads, alternating, decode core medians.
set -u
[ -d .dev/bin ] || tar xJf .dev.tar.xz
source scripts/device.sh env
B=.dev/bin
for round in 1 2 3; do for e in q noq; do for c in 2:2097152:1 2:262144:8 4:1048576:1; do
  IFS=: read G L BA <<<"$c"
  if [ $e = noq ]; then export AB_NOQ=1; else unset AB_NOQ; fi
  t=$(timeout 60 $B/attnbench-bench --variant parallel --mode decode --d-model 1024 --heads 16 --kv-heads $G \
    --context $L --batch $BA --threads 16 --precision int8 --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true --benchmark_filter=core --benchmark_format=json 2>/dev/null |
    python3 -c "import json,sys; d=json.load(sys.stdin); print([b['real_time'] for b in d['benchmarks'] if b['name'].endswith('/core/real_time_median')][0])")
  echo "$round $e G$G L$L b$BA $t"
done; done; done | tee $OUT/pair4.txt
