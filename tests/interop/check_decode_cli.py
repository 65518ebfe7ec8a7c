"""`attnbench check --mode decode --precision ... --json`: the narrow-cache decode rows are there
and judged. usage: check_decode_cli.py CHECK.json VARIANTS CACHE_TYPES (comma-separated)

For every variant and cache type: at least one decode row, every row passes against fp64 over the
same rounded or dequantized cache, and storing the cache narrow costs accuracy: the error against
the unrounded cache exceeds the error against the cache's own values (fp32 arithmetic only)."""
import json
import sys

j = json.load(open(sys.argv[1]))
variants, types = sys.argv[2].split(","), sys.argv[3].split(",")
bad = []
for v in variants:
    for t in types:
        rows = [r for r in j["cases"] if r["variant"] == v and r["precision"] == t and r["mode"] == "decode"]
        if not rows:
            bad.append(f"{v} {t}: no decode row")
        for r in rows:
            if not r["pass"]:
                bad.append(f"{v} {t} {r['problem']}: fails, err/bound {r['error_over_bound']:.3g}")
            if not r["max_abs_error_vs_unrounded"] > r["max_abs_error"] > 0:
                bad.append(f"{v} {t} {r['problem']}: error vs unrounded {r['max_abs_error_vs_unrounded']:.3g} "
                           f"not above the error vs the same cache {r['max_abs_error']:.3g}")
        if rows:
            worst = max(r["error_over_bound"] for r in rows)
            loss = max(r["max_abs_error_vs_unrounded"] for r in rows)
            print(f"{v} {t}: {len(rows)} rows, worst err/bound {worst:.3f}, max error vs unrounded {loss:.3e}")
print("\n".join(bad) if bad else "all narrow-cache decode rows pass")
sys.exit(1 if bad else 0)
