#!/usr/bin/env bash
# Two builds of attnbench-bench timed on the same cases, interleaved: ROUNDS rounds, each running
# A then B (B then A in even rounds), one repetition each, so drift of a shared machine lands on
# both; the rounds' JSON merged per build and handed to `attnbench compare` (a Mann-Whitney U test
# over the rounds, case by case).
#   bash scripts/interleave.sh A_BENCH B_BENCH ATTNBENCH ROUNDS OUTDIR -- [attnbench-bench flags]
set -euo pipefail
[ $# -ge 6 ] && [ "$6" = "--" ] || { echo "usage: interleave.sh A_BENCH B_BENCH ATTNBENCH ROUNDS OUTDIR -- FLAGS" >&2; exit 2; }
a=$1 b=$2 ab=$3 rounds=$4 out=$5
shift 6
mkdir -p "$out"
for ((r = 1; r <= rounds; ++r)); do
    order=(a b)
    [ $((r % 2)) -eq 0 ] && order=(b a)
    for w in "${order[@]}"; do
        bin=$a
        [ "$w" = b ] && bin=$b
        "$bin" "$@" --benchmark_out="$out/$w-$r.json" --benchmark_out_format=json >/dev/null
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for w in "ab":
    runs = [json.load(open(f"{out}/{w}-{r}.json")) for r in range(1, rounds + 1)]
    merged = runs[0]
    merged["benchmarks"] = [b for run in runs for b in run["benchmarks"] if b.get("run_type", "iteration") == "iteration"]
    json.dump(merged, open(f"{out}/{w}.json", "w"), indent=1)
PY
"$ab" compare "$out/a.json" "$out/b.json"
