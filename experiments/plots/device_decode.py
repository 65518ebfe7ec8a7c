#!/usr/bin/env python3
"""The report's decode section for a device variant (cuda-decode): a device decodes the step's
attention core alone over a cache filled on it once per case (the projections around the core are
the host's), so its rows carry the core's time and no step time, and the CPU's step section
(decode.py) does not apply. Here: the core's read rate of the key/value cache against the read
ceiling the harness measured on that device in the same process, per family, cache type, batch
and L, in one figure and one table. Every number is a perf.json field; Python draws.

    python3 experiments/plots/device_decode.py results/<run-id>     # the section alone
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plotting  # noqa: E402
from latent import member  # noqa: E402  (MHA, GQA G=g, MQA or MLA's form: what a row is)
from plotting import md_table, num  # noqa: E402

save = plotting.save  # report.py points this at its own writer

TYPES = ["f32", "bf16", "f16", "int8"]  # the cache's types, in the order bars and rows list them
TYPE_COLOR = {"f32": "tab:blue", "bf16": "tab:green", "f16": "tab:olive", "int8": "tab:red"}


def rows_of(perf):
    """(ok rows, failed rows) of the decode grids' cases on a device other than the CPU (MLA's are
    the latent section's)."""
    mine = [r for r in plotting.rows_of(perf, "decode") if r["mode"] == "decode" and r.get("family") != "mla"
            and r.get("device", "cpu") != "cpu"]
    ok = [r for r in mine if r["status"] == "ok" and r.get("core_time_ms")]
    return ok, [r for r in mine if r not in ok]


def order(r):
    t = r.get("precision", "f32")
    return (r["variant"], r["batch"], r["context"], -r["kv_heads"], TYPES.index(t) if t in TYPES else len(TYPES))


def plot(rows, figdir):
    """Core GB/s per family (bars per cache type), one panel per (variant, batch, L), the device's
    read ceiling as a line."""
    panels = sorted({(r["variant"], r["batch"], r["context"]) for r in rows})
    fig, axes = plt.subplots(1, len(panels), figsize=(6.0 * len(panels), 4.4), squeeze=False, sharey=True)
    types = [t for t in TYPES if any(r.get("precision", "f32") == t for r in rows)]
    for ax, (v, b, l) in zip(axes[0], panels):
        mine = [r for r in rows if (r["variant"], r["batch"], r["context"]) == (v, b, l)]
        fams = sorted({r["kv_heads"] for r in mine}, reverse=True)
        width = 0.8 / max(1, len(types))
        for k, g in enumerate(fams):  # a family's bars centred on its tick, one per cache type it ran
            bars = [r for t in types for r in mine if r["kv_heads"] == g and r.get("precision") == t]
            for i, r in enumerate(bars):
                x = k + (i - (len(bars) - 1) / 2) * width
                t = r.get("precision")
                ax.bar(x, r["kv_gbs"], width=width, color=TYPE_COLOR.get(t, "gray"), label=f"{t} cache")
                ax.annotate(f"{r['pct_read']:.0f}%", (x, r["kv_gbs"]), ha="center", va="bottom", fontsize=7)
        read = mine[0].get("read_ceiling_gbs")
        if read:
            ax.axhline(read, color="black", ls="--", lw=1.2, label=f"read ceiling (measured) {read:,.0f} GB/s")
            ax.axhline(0.9 * read, color="gray", ls=":", lw=1, label="90% of it")
        ax.set_xticks(range(len(fams)))
        labels = []
        for g in fams:  # the family, and its bf16 cache's size where it ran one
            of = [r for r in mine if r["kv_heads"] == g]
            bf16 = next((r for r in of if r.get("precision") == "bf16"), None)
            labels.append(member(of[0])[0] + (f"\n{bf16['cache_mib']:,.0f} MiB (bf16)" if bf16 else ""))
        ax.set_xticklabels(labels, fontsize=8)
        ax.set_ylabel("cache read rate, GB/s (KV bytes / core time)")
        ax.set_title(f"{v}, batch {b}, L = {l}", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
    handles, labels = axes[0][0].get_legend_handles_labels()
    keep = dict(zip(labels, handles))  # one entry per cache type (each bar is labelled)
    fig.legend(keep.values(), keep.keys(), loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, -0.12))
    r0 = rows[0]
    fig.suptitle(f"Decode on the device: the attention core's read rate of the key/value cache (% of the read ceiling "
                 f"on each bar)\nd_model {r0['d_model']}, H {r0['heads']}, d_head {r0['d_head']}; CUDA events, the L2 "
                 "flushed before each call; median of the repetitions", fontsize=9, y=1.04)
    return save(fig, figdir, "decode_device_gbs")


def table(rows):
    out = []
    for r in sorted(rows, key=order):
        out.append([r["variant"], member(r)[0], r.get("precision", "f32"), r["batch"], r["context"],
                    num(r["cache_mib"], 4), num(r["core_us"], 4), num(r["kv_gbs"], 4), num(r["pct_read"], 3),
                    num(r.get("pct_roof"), 3), num(r.get("intensity"), 3), num(r.get("check_ratio"), 2)])
    return md_table(["variant", "family", "cache", "batch", "L", "cache MiB", "core µs", "core GB/s", "% read ceiling",
                     "% roof", "FLOP / cache byte", "err/bound"], out)


def section(perf, figdir):
    """The section's markdown; empty when no device decoded."""
    ok, failed = rows_of(perf) if perf else ([], [])
    if not (ok or failed):
        return ""
    md = ["## Decoding on the device\n",
          "A device variant decodes the step's attention core over a cache filled on the device once per case (the "
          "query, key and value projections around it are the host's, so there is no step time here, and the "
          "CPU's decode section does not apply). Each case's output was held to the fp64 reference over the same "
          "cache (err/bound ≤ 1 passes) before it was timed. core GB/s = key/value bytes the core must read / its "
          "time; % read ceiling against the read kernel measured on that device in the same process (the metadata's "
          "`attnbench_peak_<device>_read_gbs`); % roof against min(read ceiling, the 16-bit matrix rate / FLOP per "
          "byte). A cache of a few tens of MiB is read in a few tens of µs, where a launch's own latency is a large "
          "share: its GB/s says that, not what the memory can do.\n"]
    if ok:
        md.append(f"![decode_device_gbs]({plot(ok, figdir)})\n")
        md.append(table(ok) + "\n")
    if failed:
        md.append("Not timed: " + "; ".join(f"{r['id']} ({r.get('error') or r['status']})" for r in failed) + ".\n")
    return "\n".join(md)


if __name__ == "__main__":
    run = sys.argv[1]
    with open(os.path.join(run, "perf.json")) as f:
        print(section(json.load(f), os.path.join(run, "figures")))
