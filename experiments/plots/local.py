#!/usr/bin/env python3
"""The report's section "Local attention" (a sliding window W on the causal mask).

Reads what the C++ wrote -- the perf rows of the grids drawn as "local" (prefill cores with and
without a window; decode steps over a growing cache and over a rolling buffer of W tokens) and
flops.json's local-attention table (scored pairs, FLOP ratio, crossover per W) -- and draws two
figures and the section's tables. Every figure is read from those files; this file computes
nothing but ratios of medians and of counted FLOPs (no window over a window).

    python3 experiments/plots/local.py results/<run-id>     # the section alone
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

COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown"]
LINES = ["-", "--", ":", "-."]
MARKERS = ["o", "s", "^", "D"]  # per window too: a series of one N is a point, with no line to tell it by


def window_label(w):
    return "no window (full causal)" if not w else f"W = {w}"


def groups(rows):
    """The rows split by shape -- family (and MLA's form), d_model, H, batch, precision -- each drawn
    as its own figure: lines of two shapes on one axis would join points of different caches.
    Yields (shape's words, its file name's suffix, rows); the suffix is empty for the only one."""
    key = lambda r: (member(r)[1], member(r)[0], r["d_model"], r["heads"], r["batch"], r.get("precision", "f32"))
    keys = sorted({key(r) for r in rows})
    for k in keys:
        _, name, dm, h, b, prec = k
        words = f"{name}, d_model {dm}, {h} query heads, batch {b}, {prec}"
        suffix = "" if len(keys) == 1 else "_" + "_".join(
            [name.lower().replace(" ", "").replace("=", ""), f"d{dm}", f"h{h}", f"b{b}", prec])
        yield words, suffix, [r for r in rows if key(r) == k]


def rows_by_mode(perf):
    ok = [r for r in plotting.rows_of(perf, "local") if r["status"] == "ok"]
    failed = [r for r in plotting.rows_of(perf, "local") if r["status"] != "ok"]
    return [r for r in ok if r["mode"] != "decode"], [r for r in ok if r["mode"] == "decode"], failed


def series(rows, x):
    """One line per (variant, threads, window), sorted by x: a colour per provider, a line style per
    window (none first). Yields (label, style, rows)."""
    windows = sorted({r.get("window", 0) for r in rows})
    providers = sorted({(r["variant"], r["threads"]) for r in rows})
    for p, (variant, threads) in enumerate(providers):
        for k, w in enumerate(windows):
            pts = sorted((r for r in rows if (r["variant"], r["threads"], r.get("window", 0)) == (variant, threads, w)),
                         key=lambda r: r[x])
            if pts:  # a device variant's thread count is the host's, not its own: left out
                on = pts[0].get("device", "cpu")
                who = f"{variant}, {threads} thr" if on == "cpu" else f"{variant} ({on})"
                yield (f"{who}, {window_label(w)}",
                       dict(color=COLORS[p % len(COLORS)], ls=LINES[k % len(LINES)], marker=MARKERS[k % len(MARKERS)],
                            mfc="white" if k else None), pts)


def plot_core(rows, figdir, words, suffix):
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for label, st, pts in series(rows, "n_q"):
        ax.plot([r["n_q"] for r in pts], [r["time_ms"] for r in pts], label=label, **st)
    ns = sorted({r["n_q"] for r in rows})
    plotting.pow2_axis(ax, ns, "sequence length N (tokens)")
    plotting.plain_log_y(ax)
    ax.set_ylabel("attention core time (ms, log scale)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=7)
    ax.set_title(f"Causal prefill core with and without a sliding window: {words}\n(slope 2: quadratic in N; "
                 "a window bends it to slope 1 once N passes W)", fontsize=9)
    fig.tight_layout()
    return save(fig, figdir, "local_core" + suffix)


def core_table(rows):
    """Per provider and N: each window's time, its speed-up over no window and the FLOP ratio."""
    out = []
    for key in sorted({(r["variant"], r["threads"], r["n_q"]) for r in rows}):
        variant, threads, n = key
        same = {r.get("window", 0): r for r in rows if (r["variant"], r["threads"], r["n_q"]) == key}
        full = same.get(0)
        for w in sorted(same):
            r = same[w]
            speed = num(full["time_ms"] / r["time_ms"], 3) if full and w else "–"
            flops = num(full["flop_matmul"] / r["flop_matmul"], 4) if full and w else "–"
            out.append([variant, threads if r.get("device", "cpu") == "cpu" else r["device"], n, window_label(w),
                        num(r["time_ms"], 4), speed, flops, num(r.get("gflops_matmul"), 4), num(r.get("pct_peak"), 3)])
    # % of peak: each row's own ceiling (the FMA peak at its threads; on a device, its 16-bit matrix rate)
    return md_table(["variant", "threads (or device)", "N [tokens]", "window", "time [ms]",
                     "speed-up over no window [x]", "FLOP ratio, no window / window [x]",
                     "matmul GFLOP/s (counted FLOPs)", "% of peak"], out)


def plot_decode(rows, figdir, words, suffix):
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
    for label, st, pts in series(rows, "context"):
        a1.plot([r["context"] for r in pts], [r["core_time_ms"] for r in pts], label=label, **st)
        a2.plot([r["context"] for r in pts], [r["cache_mib"] for r in pts], label=label, **st)
    ls_ = sorted({r["context"] for r in rows})
    for ax in (a1, a2):
        plotting.pow2_axis(ax, ls_, "cached tokens L (context length)")
        plotting.plain_log_y(ax)
        ax.grid(alpha=0.3, which="both")
    a1.set_ylabel("attention core per decode step (ms, log scale)")
    a2.set_ylabel("KV cache read per step (MiB, log scale)")
    for w in sorted({r.get("window", 0) for r in rows} - {0}):
        for ax in (a1, a2):
            ax.axvline(w, color="0.5", lw=0.8, ls=":")
            ax.annotate(f"W = {w}", (w, 1), xycoords=("data", "axes fraction"), xytext=(3, -12),
                        textcoords="offset points", fontsize=7, color="0.35")
    a1.set_title("time per step: flat once L passes W", fontsize=9)
    a2.set_title("cache per layer (every variant's): a rolling buffer stops at W tokens", fontsize=9)
    a1.legend(fontsize=8)
    fig.suptitle(f"Decode with and without a window: {words} cache (median of the repetitions)", fontsize=10)
    fig.tight_layout()
    return save(fig, figdir, "local_decode" + suffix)


def decode_table(rows):
    """Per provider and window, the step against L; beside the core's time, under a window, that
    time over the core's at the smallest L >= W of the same provider (flat past W: 1)."""
    line = lambda r: (r["variant"], r["threads"], r.get("window", 0))
    base = {}  # per windowed line, its step at the smallest L >= W
    for r in rows:
        if r.get("window", 0) and r["context"] >= r["window"]:
            if line(r) not in base or r["context"] < base[line(r)]["context"]:
                base[line(r)] = r

    def at_w(r):
        b = base.get(line(r)) if r.get("window", 0) and r["context"] >= r["window"] else None
        return num(r["core_time_ms"] / b["core_time_ms"], 3) if b else "–"

    out = [[r["variant"], r["threads"], r["context"], window_label(r.get("window", 0)), num(r["core_time_ms"], 4),
            at_w(r), num(r.get("time_ms"), 4), num(r.get("cache_mib"), 4), num(r.get("kv_gbs"), 3)]
           for r in sorted(rows, key=lambda r: (r["variant"], r["threads"], r.get("window", 0), r["context"]))]
    return md_table(["variant", "threads", "L [tokens]", "window", "core per step [ms]",
                     "core / core at the first L >= W [x]", "whole step [ms]", "cache read per step [MiB]",
                     "cache read rate [GB/s]"], out)


def flops_table(d):
    path = os.path.join(d, "flops.json")
    if not os.path.exists(path):
        return ""
    with open(path) as f:
        local = json.load(f).get("local") or []
    if not local:
        return ""

    def root(x):
        return "none" if x is None else num(x, 6)

    out = [[window_label(w["window"]), f"{w['visible_pairs']:,}", num(w["causal_over_windowed"], 5),
            root(w["matmul_closed_form"]), root(w["full_closed_form"]), f"{w['cache_bytes_f32']:,}"]
           for w in local]
    n = local[0]["n"]
    return (f"Counted by `attnbench flops` at N = {n} (the report's flops stage): the pairs one head scores, the "
            "attention FLOPs of the full causal mask over the window's, the length N* past which attention "
            "outweighs the projections (none: each token's W scored keys cost less than its projections, "
            "however long the sequence), and the cache a rolling buffer holds at L = N.\n\n"
            + md_table(["window", "scored pairs per head", "causal / windowed FLOPs [x]",
                        "crossover N*, matmul-only [tokens]", "crossover N*, full count [tokens]",
                        "cache at L = N, f32 [bytes/sequence/layer]"], out) + "\n")


def section(d, perf, figdir):
    """The section's markdown; empty when the run has no windowed case and no flops table."""
    core, decode, failed = rows_by_mode(perf) if perf else ([], [], [])
    counted = flops_table(d)
    if not (core or decode):
        return ""
    md = ["## Local attention\n",
          "A sliding window W (Mistral 7B, Gemma 2/3, gpt-oss; Shazeer 2019's 'local' rows) lets each query see "
          "the W keys ending at its own position, itself included; it needs the causal mask. The scored pairs go "
          "from N(N+1)/2 to about N W, so the core turns linear in N once N passes W, and a decode step reads a "
          "rolling buffer of W tokens (slot = position mod W) whatever the context. Every windowed case was "
          "checked against the fp64 reference with the window's mask before it was timed.\n"]
    peers = sorted({r["variant"] for r in core + decode if r.get("window", 0) and r.get("peer")})
    if peers:
        md.append(f"The peers ({', '.join(peers)}) take the window as a boolean mask on the core: neither operator "
                  "has a window, so each still scores every N_q x N_kv pair, while the GFLOP/s and FLOP ratio "
                  "columns count the window's pairs alone; in decode they are given the cache's last W rows.\n")
    if core:
        md.append("### Prefill: time against N per window\n")
        for words, suffix, rows in groups(core):
            md.append(f"**{words}.**\n")
            md.append(f"![local_core{suffix}]({plot_core(rows, figdir, words, suffix)})\n")
            md.append(core_table(rows) + "\n")
    if decode:
        md.append("### Decode: a rolling buffer against a growing cache\n")
        for words, suffix, rows in groups(decode):
            md.append(f"**{words} cache.**\n")
            md.append(f"![local_decode{suffix}]({plot_decode(rows, figdir, words, suffix)})\n")
            md.append(decode_table(rows) + "\n")
    if counted:
        md.append("### Counted\n\n" + counted)
    if failed:
        md.append("Cases that did not run: " + "; ".join(f"`{r['id']}` ({r.get('error', r['status'])})"
                                                          for r in failed) + "\n")
    return "\n".join(md)


def main(d):
    with open(os.path.join(d, "perf.json")) as f:
        perf = json.load(f)
    print(section(d, perf, os.path.join(d, "figures")))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
