#!/usr/bin/env python3
"""Plots for the decode experiment (issue 7): where MQA and GQA pay off.

Reads decode.json that `attnbench decode --out DIR` wrote and writes PNG and SVG next to it.
A separate, re-runnable step: no numbers are computed here beyond unit conversions.

    /usr/bin/python3 experiments/plots/decode.py results/decode
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import plotting  # noqa: E402

G_STYLE = {  # one colour and marker per G, fixed across every figure
    1: dict(color="tab:orange", marker="v"),
    2: dict(color="tab:purple", marker="s"),
    4: dict(color="tab:green", marker="^"),
    8: dict(color="tab:brown", marker="D"),
    16: dict(color="tab:blue", marker="o"),
}


def style(g):
    return G_STYLE.get(g, dict(color="gray", marker="x"))


def family(g, h):
    return "MHA" if g == h else ("MQA" if g == 1 else "GQA")


def label(g, h):
    return f"{family(g, h)} (G={g})"


def save(fig, d, stem):
    plotting.save(fig, d, stem)


def log2_axis(ax, ls):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ls)
    ax.set_xticklabels([f"{l // 1024}k" if l >= 1024 else str(l) for l in ls])
    ax.minorticks_off()


def leaves_l3(l3, batch, g, dh):
    """Context L at which the cache of (batch, G) outgrows the last-level cache."""
    per_token = 2 * batch * g * dh * 4
    return l3 / per_token


def main(d):
    with open(os.path.join(d, "decode.json")) as f:
        j = json.load(f)
    cfg = j["config"]
    h, dh = cfg["heads"], cfg["d_head"]
    rows = [r for r in j["rows"] if "skipped" not in r]
    variant = cfg["variants"][0]
    rows = [r for r in rows if r["variant"] == variant]
    l3 = j.get("l3_bytes") or 0
    triad = j["triad_gbs"]
    fma = j.get("fma_gflops", 0)
    meta = j["metadata"]
    reps = cfg["repetitions"]
    batches = sorted({r["batch"] for r in rows})
    gs = sorted({r["kv_heads"] for r in rows})
    ls = sorted({r["context"] for r in rows})
    sub = (f"d_model {cfg['d_model']}, H {h}, d_head {dh}, fp32, variant '{variant}', "
           f"{cfg['threads']} threads; median of {reps} repetitions; {meta.get('cpu_model', '')}")

    def series(b, g, key):
        pts = sorted((r["context"], r[key]) for r in rows if r["batch"] == b and r["kv_heads"] == g)
        return [p[0] for p in pts], [p[1] for p in pts]

    # 1. time per token vs L, one line per G; where each cache leaves L3 marked on its line
    fig, axes = plt.subplots(1, len(batches), figsize=(6.2 * len(batches), 4.6), squeeze=False)
    for ax, b in zip(axes[0], batches):
        for g in gs:
            x, y = series(b, g, "step_us_median")
            ax.plot(x, [v / 1000 for v in y], label=label(g, h), **style(g))
            if l3:
                lx = leaves_l3(l3, b, g, dh)
                if ls[0] <= lx <= ls[-1]:
                    ax.axvline(lx, color=style(g)["color"], ls=":", lw=1)
        log2_axis(ax, ls)
        ax.set_yscale("log")
        ax.set_xlabel("cached tokens L (context length)")
        ax.set_ylabel("time per decode step (ms, log scale)")
        ax.set_title(f"batch {b}: every sequence gets one token per step")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(title="family", fontsize=8)
    if l3:
        fig.text(0.5, -0.02, f"dotted lines: L at which that G's cache (2·B·G·d_head·L·4 bytes) outgrows the "
                 f"{l3 / 2**20:.0f} MiB last-level cache", ha="center", fontsize=8)
    fig.suptitle("Decode step latency vs context length\n" + sub, fontsize=9, y=1.05)
    save(fig, d, "decode_time_vs_context")

    # 2. achieved bandwidth vs L, with the measured triad ceiling
    fig, axes = plt.subplots(1, len(batches), figsize=(6.2 * len(batches), 4.6), squeeze=False, sharey=True)
    for ax, b in zip(axes[0], batches):
        for g in gs:
            x, y = series(b, g, "core_kv_gbs")
            ax.plot(x, y, label=label(g, h), **style(g))
        adj = sorted((r["context"], r["triad_now_gbs"]) for r in rows
                     if r["batch"] == b and r.get("triad_now_gbs", 0) > 0)
        if adj:
            ax.plot([p[0] for p in adj], [p[1] for p in adj], ls="none", marker="x", color="gray", ms=5,
                    label="triad measured alongside")
        ax.axhline(triad, color="black", lw=1.5, ls="--", label=f"triad ceiling (attnbench peak) {triad:.1f} GB/s")
        ax.axhline(0.7 * triad, color="gray", lw=1, ls=":", label="70% of triad")
        for g in gs:  # the roofline's arithmetic side, where it lies below the triad
            cap = fma / (h / (2 * g)) if fma else 0
            if 0 < cap < triad:
                ax.axhline(cap, color=style(g)["color"], lw=1.2, ls="-.",
                           label=f"{label(g, h)} arithmetic roof: FMA peak / {h / (2 * g):g} FLOP/B = {cap:.1f} GB/s")
        log2_axis(ax, ls)
        ax.set_xlabel("cached tokens L (context length)")
        ax.set_ylabel("cache read rate, GB/s (KV bytes / attention core time)")
        ax.set_title(f"batch {b}")
        ax.grid(True, alpha=0.3)
        ax.set_ylim(bottom=0)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, -0.16))
    fig.suptitle("Rate at which the attention core reads the key/value cache vs the measured triad ceiling\n"
                 "(above the ceiling: the data still fits the last-level cache)\n" + sub, fontsize=9, y=1.08)
    save(fig, d, "decode_bandwidth_vs_context")

    # 3. time per token vs G at fixed L (the GQA paper's time-vs-groups figure)
    fixed = [l for l in (4096, 65536) if l in ls] or [ls[-1]]
    fig, axes = plt.subplots(1, len(fixed), figsize=(6.2 * len(fixed), 4.6), squeeze=False)
    for ax, lfix in zip(axes[0], fixed):
        for b in batches:
            pts = sorted((r["kv_heads"], r["step_us_median"]) for r in rows
                         if r["batch"] == b and r["context"] == lfix)
            ax.plot([p[0] for p in pts], [p[1] / 1000 for p in pts], marker="o", label=f"batch {b}")
        ax.set_xscale("log", base=2)
        ax.set_xticks(gs)
        ax.set_xticklabels([f"{g}\n{family(g, h)}" for g in gs])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel("key/value heads G")
        ax.set_ylabel("time per decode step (ms)")
        ax.set_title(f"L = {lfix} cached tokens")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Decode step time vs number of key/value heads\n" + sub, fontsize=9, y=1.05)
    save(fig, d, "decode_time_vs_groups")

    # 4. KV-cache size vs L (analytic; what a step reads)
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for b, ls_ in zip(batches, ("-", "--")):
        for g in gs:
            x, y = series(b, g, "cache_mib")
            ax.plot(x, y, ls=ls_, label=f"{label(g, h)}, batch {b}", **style(g))
    if l3:
        ax.axhline(l3 / 2**20, color="black", lw=1, ls=":", label=f"last-level cache {l3 / 2**20:.0f} MiB")
    log2_axis(ax, ls)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("cached tokens L (context length)")
    ax.set_ylabel("KV cache per layer (MiB, log2 scale)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(f"KV cache size, 2·B·G·d_head·(L+1)·4 bytes (d_head {dh}, fp32)", fontsize=9)
    save(fig, d, "decode_cache_size")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "results/decode")
