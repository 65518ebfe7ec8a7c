#!/usr/bin/env python3
"""The Markdown of a merged run (attnbench merge): a note for a one-machine merge (report.py adds
it under the title), and for a merge over several machines the whole report.md: one section per
machine, each that machine's own report (rendered by report.py in machine-K/), never compared.

usage: merged.py RUN_DIR   (writes RUN_DIR/report.md from RUN_DIR/machine-*/report.md)
"""
import json
import os
import re
import sys


def load_merge(d):
    p = os.path.join(d, "merge.json")
    return json.load(open(p)) if os.path.exists(p) else None


def machine_text(m):
    peak = (f"fp32 FMA peak {m['fma_f32_gflops_1_thread']:.1f} GFLOP/s on 1 thread, "
            f"{m['fma_f32_gflops_all_threads']:.1f} on all" if m.get("fma_f32_gflops_all_threads") else "no peak measured")
    shards = ", ".join(str(s) for s in m["shards"])
    alls = [p["fma_f32_gflops_all_threads"] for p in m.get("shard_peaks", []) if p["fma_f32_gflops_all_threads"]]
    if len(alls) > 1:
        peak += f" (the shards measured {min(alls):.1f} to {max(alls):.1f} on all threads)"
    return (f"{m.get('cpu_model', '?')}, {m.get('logical_cores', '?')} logical CPUs, {m.get('cpu_simd_flags', '?')}; "
            f"{peak} (host {m.get('hostname', '?')}; shards {shards})")


def note(d):
    """The paragraph a one-machine merged run carries under its title; [] for an unsharded run."""
    m = load_merge(d)
    if not m:
        return []
    where = (f"this machine's part of a merge over {m['part_of_merge_over_machines']} machines"
             if m.get("part_of_merge_over_machines") else "all on one machine")
    out = [f"Merged (`attnbench merge`) from {m['shards_given']} of {m['shards']} shards of one sweep "
           f"(FNV-1a {m['sweep_fnv1a64']}), {where}: {machine_text(m['machines'][0])}. "
           "Peak and check below are the first shard's of this machine; every shard ran both on its own "
           "machine.\n"]
    if m["missing_shards"] or m["missing_cases"]:
        out.append(f"**Incomplete:** shards not given {m['missing_shards']}; {len(m['missing_cases'])} cases not run"
                   + (": " + ", ".join(m["missing_cases"][:10]) if m["missing_cases"] else "") + ".\n")
    return out


def demote(text):
    """Headings one level down (## -> ###), outside fenced code blocks."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#+ ", line):
            line = "#" + line
        out.append(line)
    return "\n".join(out)


def compose(d):
    m = load_merge(d)
    md = [f"# attnbench report: {os.path.basename(os.path.abspath(d))}\n",
          f"Merged (`attnbench merge`) from {m['shards_given']} of {m['shards']} shards of one sweep "
          f"(FNV-1a {m['sweep_fnv1a64']}) that ran on {len(m['machines'])} different machines. "
          f"Rule: {m['machine_rule']}. Each machine has its own section below, with its own peak, check "
          "and timings; no table or figure puts two machines' cases side by side.\n"]
    if m["missing_shards"] or m["missing_cases"]:
        md.append(f"**Incomplete:** shards not given {m['missing_shards']}; {len(m['missing_cases'])} cases not run.\n")
    for mach in m["machines"]:
        sub = os.path.join(d, mach["id"], "report.md")
        md.append(f"## {mach['id']}: {machine_text(mach)}\n")
        text = open(sub).read()
        text = re.sub(r"^# .*\n", "", text, count=1)  # the machine's own title: replaced by the heading above
        text = demote(text)
        # links and images relative to the machine's folder
        text = re.sub(r"\]\((?!https?:|#|/)([^)]+)\)", lambda g: f"]({mach['id']}/{g.group(1)})", text)
        md.append(text)
    tmp = os.path.join(d, ".report.md.tmp")
    with open(tmp, "w") as f:
        f.write("\n".join(md))
    os.replace(tmp, os.path.join(d, "report.md"))


if __name__ == "__main__":
    compose(sys.argv[1])
