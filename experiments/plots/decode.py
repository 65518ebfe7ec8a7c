#!/usr/bin/env python3
"""The report's decoding section: where MQA and GQA pay off.

Reads the decode rows of a report run's perf.json (attnbench-bench's decode mode: the whole
step and the attention core alone over the cache, per case) and draws the four figures and
writes the section's tables and prose (decode_text.py). Every figure it shows -- bytes,
intensity, roofline, % of the read ceiling and of the triad, where a cache outgrows the last-level
cache, the byte ratio H/G -- is read from the JSON, where the report wrote it (attn.figures); this
file draws and words, and computes nothing but medians' ratios.

    python3 experiments/plots/decode.py results/<run-id>     # the figures alone
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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


def plain_log_y(ax):
    """Log y axis labelled 0.5, 1, 2, 5, ... (not 10^0 alone); call after plotting."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v:g}"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylim(lo, hi)


def log2_axis(ax, ls):
    ax.set_xscale("log", base=2)
    ax.set_xticks(ls)
    ax.set_xticklabels([f"{l // 1024}k" if l >= 1024 else str(l) for l in ls])
    ax.minorticks_off()


DTYPES = ["f32", "bf16", "f16", "int8"]  # the cache's types, in the order tables and legends list them
DTYPE_COLOR = {"f32": "tab:blue", "bf16": "tab:green", "f16": "tab:olive", "int8": "tab:red"}


class Decode:
    """The decode rows of one variant (the first in the run) at one model size, indexed. A decode
    case's precision is its cache's type: the figures of one type (f32 when the run has it) are
    `rows`/`get`; every type's rows are `all_rows`/`getp`."""

    def __init__(self, perf, meta=None):
        # the thresholds the section's wording uses, as the C++ wrote them (attn::decode_wording)
        self.wording = {w["name"]: w["value"] for w in (perf or {}).get("schema", {}).get("wording", [])}
        mine = plotting.rows_of(perf, "decode")  # the grids drawn as the decode figures
        # MLA's rows are the latent section's (latent.py): these figures key on G, and MLA's naive
        # form has MHA's
        mine = [r for r in mine if r.get("family") != "mla"]
        rows = [r for r in mine if r["mode"] == "decode" and r["status"] == "ok" and r.get("time_ms")]
        self.failed = [r for r in mine if r["mode"] == "decode" and r["status"] != "ok"]
        self.rows = self.all_rows = []
        if not rows:
            return
        first = rows[0]
        self.variant, self.d_model, self.h = first["variant"], first["d_model"], first["heads"]
        rows = [r for r in rows if (r["variant"], r["d_model"], r["heads"]) == (self.variant, self.d_model, self.h)]
        self.threads = max(r["threads"] for r in rows)
        self.all_rows = [r for r in rows if r["threads"] == self.threads]
        present = {r.get("precision", "f32") for r in self.all_rows}
        self.dtypes = [t for t in DTYPES if t in present] + sorted(present - set(DTYPES))
        self.dtype = "f32" if "f32" in present else self.dtypes[0]
        self.byp = {(r["batch"], r["kv_heads"], r["context"], r.get("precision", "f32")): r for r in self.all_rows}
        self.rows = [r for r in self.all_rows if r.get("precision", "f32") == self.dtype]
        first = self.rows[0]
        self.dh = first["d_head"]
        self.batches = sorted({r["batch"] for r in self.rows})
        self.gs = sorted({r["kv_heads"] for r in self.rows})
        self.ls = sorted({r["context"] for r in self.rows})
        self.reps = max(r["repetitions"] for r in self.rows)
        self.by = {(r["batch"], r["kv_heads"], r["context"]): r for r in self.rows}
        # the run's ceilings at the cases' thread count (peak.json): the read-only stream, a decode
        # step's memory ceiling, and the triad beside it for reference (a run from before the read
        # probe has the triad alone, under its old name)
        self.triad = first.get("triad_ceiling_gbs") or first.get("peak_gbs")
        self.read = first.get("read_ceiling_gbs")
        self.memory = self.read or self.triad
        self.memory_name = "read ceiling" if self.read else "triad"
        self.llc_mib = first.get("llc_mib") or 0
        # from this many MiB on a read-only stream ran at DRAM speed (attnbench peak's scan); twice
        # the last-level cache in a run from before the scan
        self.dram_mib = first.get("dram_from_mib") or 2 * self.llc_mib
        cpu = (meta or {}).get("cpu_model", "")
        self.sub = (f"d_model {self.d_model}, H {self.h}, d_head {self.dh}, {self.dtype} cache, variant '{self.variant}', "
                    f"{self.threads} threads; median of {self.reps} repetitions" + (f"; {cpu}" if cpu else ""))

    def get(self, b, g, l):
        return self.by.get((b, g, l))

    def getp(self, b, g, l, t):
        return self.byp.get((b, g, l, t))

    def series(self, b, g, key):
        pts = [(l, self.by[(b, g, l)].get(key)) for l in self.ls if (b, g, l) in self.by]
        pts = [(x, y) for x, y in pts if y is not None]
        return [p[0] for p in pts], [p[1] for p in pts]


def plot_time_vs_context(dec, d):
    """Time per decode step against L, one line per G; where each cache outgrows the LLC marked."""
    h, ls = dec.h, dec.ls
    fig, axes = plt.subplots(1, len(dec.batches), figsize=(6.2 * len(dec.batches), 4.6), squeeze=False)
    for ax, b in zip(axes[0], dec.batches):
        for g in dec.gs:
            x, y = dec.series(b, g, "time_ms")
            ax.plot(x, y, label=label(g, h), **style(g))
            row = next((dec.get(b, g, l) for l in ls if dec.get(b, g, l)), None)
            lx = row.get("llc_context") if row else None
            if lx and ls[0] <= lx <= ls[-1]:
                ax.axvline(lx, color=style(g)["color"], ls=":", lw=1)
        log2_axis(ax, ls)
        plain_log_y(ax)
        ax.set_xlabel("cached tokens L (context length)")
        ax.set_ylabel("time per decode step (ms, log scale)")
        ax.set_title(f"batch {b}: every sequence gets one token per step")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(title="family", fontsize=8)
    if dec.llc_mib:
        fig.text(0.5, -0.02, f"dotted lines: L at which that G's cache (2·B·G·d_head·(L+1)·4 bytes) outgrows the "
                 f"{dec.llc_mib:.0f} MiB last-level cache", ha="center", fontsize=8)
    fig.suptitle("Decode step latency vs context length\n" + dec.sub, fontsize=9, y=1.05)
    save(fig, d, "decode_time_vs_context")


def plot_bandwidth_vs_context(dec, d):
    """The attention core's cache read rate against L, with the read ceiling (the triad for
    reference) and the arithmetic roofs."""
    h, ls = dec.h, dec.ls
    fig, axes = plt.subplots(1, len(dec.batches), figsize=(6.2 * len(dec.batches), 4.6), squeeze=False, sharey=True)
    for ax, b in zip(axes[0], dec.batches):
        for g in dec.gs:
            x, y = dec.series(b, g, "kv_gbs")
            ax.plot(x, y, label=label(g, h), **style(g))
        def alongside(key):
            pts = [(l, next((dec.get(b, g, l)[key] for g in dec.gs
                             if dec.get(b, g, l) and dec.get(b, g, l).get(key)), None)) for l in ls]
            return [p for p in pts if p[1]]
        read_along, triad_along = alongside("read_alongside_gbs"), alongside("triad_alongside_gbs")
        if read_along:
            ax.plot(*zip(*read_along), ls="none", marker="x", color="black", ms=6, label="read measured alongside")
        if triad_along:
            ax.plot(*zip(*triad_along), ls="none", marker="+", color="gray", ms=6,
                    label="triad measured alongside" + (" (reference)" if dec.read else ""))
        ax.axhline(dec.memory, color="black", lw=1.5, ls="--",
                   label=f"{dec.memory_name} (attnbench peak) {dec.memory:.1f} GB/s")
        if dec.read:
            ax.axhline(dec.triad, color="gray", lw=1.2, ls=(0, (5, 2, 1, 2)),
                       label=f"triad (attnbench peak, reference) {dec.triad:.1f} GB/s")
        ax.axhline(0.7 * dec.memory, color="gray", lw=1, ls=":", label=f"70% of the {dec.memory_name}")
        top = max([dec.memory] + [p[1] for p in read_along])
        for g in dec.gs:  # the roofline's arithmetic side, where it lies below the memory ceiling drawn
            row = next((dec.get(b, g, l) for l in ls if dec.get(b, g, l)), None)
            cap = row.get("arith_roof_gbs") if row else None
            if cap and cap < top:
                ax.axhline(cap, color=style(g)["color"], lw=1.2, ls="-.",
                           label=f"{label(g, h)} arithmetic roof: FMA peak / {row['intensity']:g} FLOP/B = {cap:.1f} GB/s")
        log2_axis(ax, ls)
        ax.set_xlabel("cached tokens L (context length)")
        ax.set_ylabel("cache read rate, GB/s (KV bytes / attention core time)")
        ax.set_title(f"batch {b}")
        ax.grid(True, alpha=0.3)
    axes[0][0].set_ylim(0, 1.08 * max(ax.dataLim.y1 for ax in axes[0]))  # shared: every panel's data in view
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, bbox_to_anchor=(0.5, -0.16))
    probes = ("×: the read probe measured in the same harness run as that batch and L, +: the triad" if dec.read
              else "+: the triad measured in the same harness run as that batch and L")
    fig.suptitle(f"Rate at which the attention core reads the key/value cache vs the measured {dec.memory_name}\n"
                 f"(above it: the data still fits the last-level cache; {probes})\n" + dec.sub, fontsize=9, y=1.08)
    save(fig, d, "decode_bandwidth_vs_context")


def plot_time_vs_groups(dec, d):
    """Time per decode step against G at fixed L (the GQA paper's time-vs-groups figure)."""
    h, gs = dec.h, dec.gs
    # a panel per L at which some batch ran two or more G (a sweep that scales L with G, as
    # decode-roof's fixed cache size does, has none: no figure); 4k and the longest such L
    def n_groups(l):
        return max((sum(1 for g in gs if dec.get(b, g, l)) for b in dec.batches), default=0)
    shared = [l for l in dec.ls if n_groups(l) >= 2]
    if not shared:
        return
    fixed = sorted({l for l in (4096,) if l in shared} | {shared[-1]})
    fig, axes = plt.subplots(1, len(fixed), figsize=(6.2 * len(fixed), 4.6), squeeze=False)
    for ax, lfix in zip(axes[0], fixed):
        for b in dec.batches:
            pts = [(g, dec.get(b, g, lfix)["time_ms"]) for g in gs if dec.get(b, g, lfix)]
            if pts:
                ax.plot(*zip(*pts), marker="o", label=f"batch {b}")
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
    fig.suptitle("Decode step time vs number of key/value heads\n" + dec.sub, fontsize=9, y=1.05)
    save(fig, d, "decode_time_vs_groups")


def plot_cache_size(dec, d):
    """The key/value cache a step reads against L (analytic, from the harness's cache_mib)."""
    h = dec.h
    fig, ax = plt.subplots(figsize=(6.4, 4.6))
    for b, ls_ in zip(dec.batches, ("-", "--", "-.", ":")):
        for g in dec.gs:
            x, y = dec.series(b, g, "cache_mib")
            ax.plot(x, y, ls=ls_, label=f"{label(g, h)}, batch {b}", **style(g))
    if dec.llc_mib:
        ax.axhline(dec.llc_mib, color="black", lw=1, ls=":", label=f"last-level cache {dec.llc_mib:.0f} MiB")
    log2_axis(ax, dec.ls)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("cached tokens L (context length)")
    ax.set_ylabel("KV cache per layer (MiB, log2 scale)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    ax.set_title(f"KV cache size, 2·B·G·(L+1)·d_head elements (d_head {dec.dh}, {dec.dtype} cache)", fontsize=9)
    save(fig, d, "decode_cache_size")


def short_count(n):
    """524288 -> '512k', 4194304 -> '4M' (powers of 1024 that divide n), else n."""
    for unit, div in (("M", 1 << 20), ("k", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div}{unit}"
    return str(n)


def dtype_points(dec):
    """{(batch, G): L} where the cache types are compared: for each batch and family, the largest L
    at which it ran with more than one type (decode-roof scales L with G to one cache size, so each
    family has its own)."""
    pts = {}
    for r in dec.all_rows:
        b, g, l = r["batch"], r["kv_heads"], r["context"]
        if sum(1 for t in dec.dtypes if dec.getp(b, g, l, t)) > 1:
            pts[(b, g)] = max(pts.get((b, g), l), l)
    return pts


def plot_dtypes(dec, d):
    """The cache's type: bytes per cached token, time per generated token and the share of the
    type's roofline reached, per family, at one batch (the one with the most families compared,
    then the largest), each family at its dtype_points L."""
    pts = dtype_points(dec)
    if not pts:
        return
    b = max({bb for bb, _ in pts}, key=lambda bb: (sum(1 for x, _ in pts if x == bb), bb))
    gs = [g for g in dec.gs if (b, g) in pts]
    ls = {pts[(b, g)] for g in gs}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    fig.subplots_adjust(wspace=0.32)
    width = 0.8 / len(dec.dtypes)
    panels = [("kv_bytes_per_cached_token", "KV cache bytes per cached token\n(K and V, every key/value head; "
               "int8 with its scales)", "{:.0f}"),
              ("us_per_token", "time per generated token (µs)\n(whole decode step / batch)", "{:.0f}"),
              ("pct_roof_alongside", "cache read rate, % of the type's roofline\nmin(read alongside, FMA peak / "
               "FLOP per cache byte)", "{:.0f}")]
    for ax, (key, ylabel, fmt) in zip(axes, panels):
        for i, t in enumerate(dec.dtypes):
            xs, ys, arith = [], [], []
            for j, g in enumerate(gs):
                r = dec.getp(b, g, pts[(b, g)], t)
                v = r.get(key) if r else None
                if v is None and key == "pct_roof_alongside" and r:
                    v = r.get("pct_roof")
                if v is not None:
                    xs.append(j + (i - (len(dec.dtypes) - 1) / 2) * width)
                    ys.append(v)
                    arith.append(key == "pct_roof_alongside" and bool(r.get("roof_arith")))
            bars = ax.bar(xs, ys, width, color=DTYPE_COLOR.get(t, "gray"), label=t)
            for bar, a in zip(bars, arith):  # compute-bound: the roofline's arithmetic side
                if a:
                    bar.set_hatch("///")
                    bar.set_edgecolor("white")
            # upright labels run into each other's digits on neighbouring bars (4096 4096)
            ax.bar_label(bars, labels=[fmt.format(v) for v in ys], fontsize=6, padding=2, rotation=90)
        ax.set_xticks(range(len(gs)))
        ax.set_xticklabels([f"{family(g, dec.h)}\nG={g}" + (f"\nL={short_count(pts[(b, g)])}" if len(ls) > 1 else "")
                            for g in gs])
        ax.set_ylabel(ylabel, fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.18)
    axes[2].axhline(100, color="black", lw=1, ls="--", label="the roofline")
    # issue 46's shares: 80 % of the memory side, 65 % of the arithmetic side (hatched bars)
    axes[2].axhline(80, color="gray", lw=1, ls=":", label="80 %: memory-bound bars")
    axes[2].axhline(65, color="gray", lw=1, ls="-.", label="65 %: compute-bound bars (hatched)")
    axes[2].legend(handles=axes[2].get_lines(), fontsize=7, loc="upper left")
    axes[0].legend(title="cache type", fontsize=8)
    at = f"L = {next(iter(ls))} cached tokens" if len(ls) == 1 else "each family's L (under its name)"
    fig.suptitle(f"The key/value cache's type at {at}, batch {b} (weights, queries and arithmetic "
                 "fp32; on AVX512-VNNI an int8 cache's scores and P V (G >= H/16) in integer products;\n"
                 "where vdpbf16ps outruns the FMA, a bf16 cache's scores and P V at G < H <= 16 G on it, queries and weights in bf16)\n"
                 + dec.sub.replace(f"{dec.dtype} cache, ", ""), fontsize=9, y=1.04)
    save(fig, d, "decode_cache_dtype")


def plot_all(dec, d):
    plot_time_vs_context(dec, d)
    plot_bandwidth_vs_context(dec, d)
    plot_time_vs_groups(dec, d)
    plot_cache_size(dec, d)
    if len(dec.dtypes) > 1:
        plot_dtypes(dec, d)


def main(d):
    with open(os.path.join(d, "perf.json")) as f:
        perf = json.load(f)
    meta = {}
    if os.path.exists(os.path.join(d, "metadata.json")):
        with open(os.path.join(d, "metadata.json")) as f:
            meta = json.load(f)
    dec = Decode(perf, meta)
    if not dec.rows:
        sys.exit(f"{d}/perf.json has no decode case that ran")
    plot_all(dec, os.path.join(d, "figures"))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
