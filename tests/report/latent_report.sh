#!/usr/bin/env bash
# attnbench report on a tiny MLA sweep (tests/report/latent.toml) through the real harness: the
# "Beyond GQA" section once, with DeepSeek-V2's Table 1 (V2's widths: MLA 512 + 64 = 576
# elements per token, MHA 2 x 128 x 128 = 32,768, by hand), the parameters of the three
# configurations (V2's matrices 149,225,472, by hand from the paper's widths), the decode rows of
# both forms beside MHA and MQA and the absorbed/naive table, the layer in both forms, the check's
# MLA rows with their form; MLA's rows stay out of the decoding section (which keys on G).
# usage: latent_report.sh ATTNBENCH PYTHON WORKDIR
set -euo pipefail
ab=$1 py=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$work" && mkdir -p "$work"
"$ab" report --sweep "$here/latent.toml" --out "$work/run" 2>"$work/stderr" || {
    cat "$work/stderr"; echo "FAIL: report exited $?"; exit 1; }
"$py" - "$work/run" <<'PY'
import csv, json, os, sys
run = sys.argv[1]
rows = list(csv.DictReader(open(os.path.join(run, "perf.csv"))))
assert len(rows) == 10 and all(r["status"] == "ok" for r in rows), [(r["id"], r["status"]) for r in rows]
forms = sorted((r["mode"], r["form"]) for r in rows if r["family"] == "mla")
assert forms == [("decode", "absorb")] * 2 + [("decode", "naive")] * 2 + [("layer", "absorb"), ("layer", "naive")], forms
lp = json.load(open(os.path.join(run, "latent", "params.json")))
v2 = next(c for c in lp["rows"] if c["configuration"] == "DeepSeek-V2")
assert v2["closed_form"]["matrices"] == 149225472, v2["closed_form"]
cache = {c["what"]: c["elements_per_token"] for c in v2["cache"]}
assert cache["MLA absorb"] == 576 and cache["MHA"] == 32768, cache
check = json.load(open(os.path.join(run, "check.json")))["cases"]
mla = {(c["form"], c["precision"]) for c in check if c["family"] == "mla"}
assert ("absorb", "f32") in mla and ("naive", "f32") in mla, mla
md = open(os.path.join(run, "report.md")).read()
assert md.count("## Beyond GQA: latent attention") == 1
assert "## Incremental decoding" not in md, "MLA's rows and the latent-only grids stay out of the decode section"
assert "| DeepSeek-V2 | MLA absorb | 576 |" in md and "| DeepSeek-V2 | 5120 | 128 | 1536 | 512 |" in md
assert md.count("| MLA absorbed | f32 |") == 2 and md.count("| MLA naive | f32 |") == 2 and md.count("| MQA | f32 |") == 2
assert "absorbed speed-up [x]" in md and "### The layer (prefill) in both forms" in md
png = os.path.join(run, "figures", "latent_decode_d128_h16_b1.png")
assert "figures/latent_decode_d128_h16_b1.png" in md and os.path.getsize(png) > 0
print("latent report ok:", len(rows), "cases")
PY
echo ok
