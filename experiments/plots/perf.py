"""The performance section of report.md: time, GFLOP/s and % of peak against N, the free-lunch
sweep over H, and their tables. It draws and formats what perf.json and peak.json hold."""
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from plotting import (config_key, config_text, grids_drawn_as, md_table, num, plain_log_y, pow2_axis,  # noqa: E402
                      rows_of, save, shape_fields, varying_fields, field_text)


def figure_path(fig, figdir, stem):
    """Writes figures/STEM.png and .svg; the path report.md links."""
    save(fig, figdir, stem, quiet=True)
    return f"figures/{stem}.png"

# Plot styles are derived, not listed per name: each variant of a run gets the next colour and
# marker in sorted order (assign_styles), so a newly registered variant needs no edit here.
COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
          "tab:gray", "tab:olive", "tab:cyan"]
MARKERS = ["o", "v", "^", "s", "D", "P", "X", "*"]
_styles = {}
PEERS = set()  # providers (other libraries): drawn dashed


def assign_styles(names):
    for i, v in enumerate(sorted(set(names))):
        _styles[v] = dict(color=COLORS[i % len(COLORS)], marker=MARKERS[i % len(MARKERS)])


# A precision other than fp32 is a series of its own ("simd bf16"): the variant's colour and
# marker, hollow, with its own line style; peers are dashed.
PRECISION_LINES = {"bf16": "-.", "f16": ":", "f64": (0, (5, 1, 1, 1, 1, 1))}


def series_name(r):
    p = r.get("precision", "f32")
    return r["variant"] if p == "f32" else f"{r['variant']} {p}"


def style(name):
    name, fewer, _ = name.partition(THREADS_MARK)
    variant, _, precision = name.partition(" ")
    if variant not in _styles:
        i = len(_styles)
        _styles[variant] = dict(color=COLORS[i % len(COLORS)], marker=MARKERS[i % len(MARKERS)])
    s = dict(_styles[variant])
    if variant in PEERS:
        s["ls"] = "--"
    if precision:
        s.update(ls=PRECISION_LINES.get(precision, "-."), mfc="none")
    if fewer:  # at fewer threads than its most: dotted (a peer beside our line at those threads)
        s["ls"] = ":"
    return s


# A panel's fixed sizes are the shape's fields (perf.json's schema) but the x axis, the fields that
# move with it and the precision (a line style); the thread count is not one of them: each variant
# is drawn at the most threads it ran with (single-threaded variants at 1), and again, dotted, at
# each fewer thread count where it ran at two or more x values (series "parallel@2": a sweep of
# `parallel` on 2 and on 16 threads draws both lines); its legend entry says how many. A peer is
# drawn at its most threads too, and again at each fewer thread count one of our variants is drawn
# at (series "ort-attention@1"), so that every line of ours has the peers that ran at its thread
# count beside it.
THREADS_MARK = "@"


def config_keys(perf, x):
    moves = {"n_q": {"n_kv"}, "heads": {"kv_heads", "d_head", "family"}}.get(x, set())
    return tuple(k for k in shape_fields(perf) if k not in {x, "precision"} | moves)


def threads_of(r):
    return r["threads"]


def variant_label(v, pts):
    if device_of([r for _, r in pts]):
        return v  # a device's variant: the host's threads say nothing of it
    t = threads_of(pts[0][1])
    return f"{v.partition(THREADS_MARK)[0]} ({t} thread{'s' if t != 1 else ''})"


def device_of(rows):
    """The device these rows computed on where it is not the CPU (their cases' `device`), else None."""
    devs = {r.get("device", "cpu") for r in rows} - {"cpu"}
    return devs.pop() if len(devs) == 1 else None


def ok_rows(rows):
    return [r for r in rows if r["status"] == "ok" and r.get("time_ms")]


def series_over(rows, x_key, fixed_keys):
    """{config: {variant: [(x, row)]}} for every config (the fixed_keys) of the rows with >= 2
    distinct x values; each variant at the most threads it ran with in that config and at each
    fewer thread count with >= 2 x values, and each peer also at the fewer thread counts ours are
    drawn at (THREADS_MARK)."""
    groups = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[config_key(r, fixed_keys)][series_name(r)].append((r[x_key], r))
    for by_variant in groups.values():
        ours, peers = set(), {}
        for v, pts in list(by_variant.items()):
            most = max(threads_of(r) for _, r in pts)
            at = {t: [(x, r) for x, r in pts if threads_of(r) == t] for t in {threads_of(r) for _, r in pts}}
            by_variant[v] = at[most]
            if any(r.get("peer") for _, r in pts):
                peers[v] = at
                continue
            ours.add(most)
            for t in sorted(set(at) - {most}):
                if len({x for x, _ in at[t]}) >= 2:
                    by_variant[f"{v}{THREADS_MARK}{t}"] = at[t]
                    ours.add(t)
        for v, at in peers.items():
            for t in sorted(ours & set(at) - {max(at)}):
                by_variant[f"{v}{THREADS_MARK}{t}"] = at[t]
    out = {}
    for cfg, by_variant in groups.items():
        xs = {x for pts in by_variant.values() for x, _ in pts}
        if len(xs) >= 2:
            out[cfg] = {v: sorted(pts, key=lambda p: p[0]) for v, pts in by_variant.items()}
    return out


def undrawn(perf, figure, x_key, series):
    """The grids drawn as `figure` none of whose cases landed in a drawn panel, with why: one x
    value per line (or none ran)."""
    drawn = {g for by_v in series.values() for pts in by_v.values() for _, r in pts for g in r.get("grids", [])}
    out = []
    for g in sorted(grids_drawn_as(perf, figure) - drawn):
        rows = [r for r in perf["cases"] if g in r.get("grids", [])]
        ok = ok_rows(rows)
        why = ("none of its cases ran" if not ok else
               f"one {x_key} per panel ({', '.join(sorted({str(r[x_key]) for r in ok}))}): nothing to draw against it")
        out.append((g, why))
    return out


def peak_for(rows, threads):
    """The measured FMA ceiling (GFLOP/s) the C++ held these rows to at this thread count (each row's
    peak_gflops), and its label."""
    if device_of(rows):  # each harness process measured the device's 16-bit matrix rate: their median
        peaks = sorted(r["peak_gflops"] for r in rows if r.get("peak_gflops"))
        return (peaks[len(peaks) // 2], f"{device_of(rows)} bf16 GEMM") if peaks else (None, None)
    peaks = {r["peak_gflops"] for r in rows if threads_of(r) == threads and r.get("peak_gflops")}
    return (peaks.pop(), f"{threads}-thread") if len(peaks) == 1 else (None, None)


def bf16_own_peak(rows):
    """Whether bf16 rows were held to a peak of their own (the CPU's bf16 products: AMX tiles or
    vdpbf16ps, attn.figures), not to the fp32 FMA peak the other rows at their thread count had."""
    fma = {(threads_of(r), r.get("peak_gflops")) for r in rows if r.get("precision", "f32") != "bf16"}
    return any((threads_of(r), r.get("peak_gflops")) not in fma for r in rows if r.get("precision") == "bf16")


def plot_vs_n(d, figdir, perf, peak):
    """time, GFLOP/s and % of peak against N for the grids drawn so (vs_n): one panel per
    configuration their cases form, one line per variant; and the grids that could not be drawn,
    with why."""
    series = series_over(ok_rows(rows_of(perf, "vs_n")), "n_q", config_keys(perf, "n_q"))
    configs = sorted(series, key=lambda c: [str(v) for _, v in c])
    skipped = undrawn(perf, "vs_n", "n_q", series)
    if not configs:
        return [], skipped
    figures = []
    for metric, stem, ylabel, title in (
        ("time_ms", "perf_time_vs_n", "time per call [ms] (median)", "Time against sequence length"),
        ("gflops_matmul", "perf_gflops_vs_n", "matmul-only rate [GFLOP/s] (median)", "Throughput against sequence length"),
        ("pct_peak", "perf_pct_peak_vs_n", None, "Share of this machine's peak"),  # the label: by the ceiling
    ):
        fig, axes = plt.subplots(1, len(configs), figsize=(6.2 * len(configs), 4.6), squeeze=False)
        for ax, cfg in zip(axes[0], configs):
            ns = sorted({x for pts in series[cfg].values() for x, _ in pts})
            panel = [r for pts in series[cfg].values() for _, r in pts]
            dev = device_of(panel)
            # the share of the peak measured alongside (the same harness run) where every row has
            # one: the machine's ceiling in the minutes each row was timed, not before the sweep
            along = metric == "pct_peak" and all(r.get("pct_peak_alongside") is not None for r in panel)
            key = "pct_peak_alongside" if along else metric
            for v in sorted(series[cfg]):
                pts = [(x, r[key]) for x, r in series[cfg][v] if r.get(key) is not None]
                if pts:
                    ax.plot(*zip(*pts), label=variant_label(v, series[cfg][v]), **style(v))
            pow2_axis(ax, ns, "sequence length N = N_q = N_kv [tokens]")
            if metric == "time_ms":
                # N^2 guide through the fastest variant's first point
                firsts = [pts[0][1]["time_ms"] for pts in series[cfg].values() if pts[0][0] == ns[0]]
                if firsts and len(ns) > 2:
                    y0 = min(firsts)
                    ax.plot(ns, [y0 * (n / ns[0]) ** 2 for n in ns], ls=":", color="black", lw=1, label="∝ N² (guide)")
            if metric == "gflops_matmul":
                threads = sorted({threads_of(pts[0][1]) for pts in series[cfg].values()}, reverse=True)
                top = ax.get_ylim()[1]
                for t, ls in zip(threads, ("--", ":")):
                    gf, which = peak_for([r for pts in series[cfg].values() for _, r in pts], t)
                    if gf:
                        what = "rate" if dev else "FMA peak"
                        ax.axhline(gf, color="black", ls=ls, lw=1.2, label=f"measured {which} {what} ({gf:.0f})")
                        top = max(top, gf)
                ax.set_ylim(0, top * 1.08)
            own = bf16_own_peak([r for pts in series[cfg].values() for _, r in pts])
            if metric == "pct_peak":
                ax.axhline(100, color="black", ls="--", lw=1.2,
                           label=f"the {dev}'s measured\nbf16 GEMM rate" if dev else
                           "measured peak at each variant's\nthreads (fp32: FMA; bf16: the\nCPU's bf16 product)" +
                           ("\nx the FMA probe's drift" if along else "") if own
                           else "FMA peak measured alongside\n(same run, each variant's threads)" if along
                           else "measured FMA peak\n(at each variant's threads)")
                # never clip: a share above 100 % says the peak was measured low, and must show
                top = max([110] + [r[key] * 1.05 for r in panel if r.get(key) is not None])
                ax.set_ylim(0, top)
                if not along and any(r.get("peak_in_doubt") for r in panel):
                    ax.text(0.02, 0.02, "peak measured under load: shares overstated", transform=ax.transAxes,
                            fontsize=8, color="firebrick")
                if along:  # a share of the probe alongside above 100 %: that probe, not the case, was slowed
                    slow = [(x, r[key]) for pts in series[cfg].values() for x, r in pts if along_high(r)]
                    if slow:
                        ax.plot(*zip(*slow), ls="none", marker="o", ms=13, mfc="none", mec="firebrick", mew=1.5,
                                label="in doubt (†): the FMA probe\nalongside was slowed, not the case")
            if metric == "time_ms":
                plain_log_y(ax)  # after plotting: the data set the limits
            if metric == "pct_peak":
                ceiling = (f"the {dev}'s measured bf16 GEMM rate" if dev else
                           "the peak measured alongside (bf16: its own)" if along and own else
                           "the FMA peak measured alongside" if along else
                           "the measured peak (bf16: its own)" if own else "the measured FMA peak")
                ax.set_ylabel(f"share of {ceiling} [%]")
            else:
                ax.set_ylabel(ylabel)
            ax.set_title(config_text(cfg), fontsize=10)
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=8, title="variant", title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
        modes = sorted({dict(c).get("mode", "?") for c in configs})
        fig.suptitle(f"{title} (attention {'/'.join(modes)}; fp32 unless marked bf16/f16)", y=1.02)
        fig.tight_layout()
        figures.append((stem, figure_path(fig, figdir, stem), [config_text(c) for c in configs]))
    return figures, skipped


def plot_free_lunch(d, figdir, perf):
    """time against H at fixed d_model and N for the grids drawn so (vs_heads): the parameters and
    matmul FLOPs stay put. Returns (path, configs, series, skipped) or (None, ..., skipped)."""
    rows = [r for r in ok_rows(rows_of(perf, "vs_heads")) if r["kv_heads"] == r["heads"]]
    series = series_over(rows, "heads", config_keys(perf, "heads"))
    skipped = undrawn(perf, "vs_heads", "heads", series)
    if not series:
        return None, [], {}, skipped
    configs = sorted(series, key=lambda c: (dict(c).get("mode") != "layer", [str(v) for _, v in c]))
    fig, axes = plt.subplots(1, len(configs), figsize=(6.4 * len(configs), 4.8), squeeze=False)
    for ax, cfg in zip(axes[0], configs):
        c = dict(cfg)
        mode, dm, n, b, causal = c.get("mode"), c.get("d_model"), c.get("n_q"), c.get("batch"), c.get("causal")
        hs = sorted({x for pts in series[cfg].values() for x, _ in pts})
        for v in sorted(series[cfg]):
            ax.plot(*zip(*[(h, r["time_ms"]) for h, r in series[cfg][v]]),
                    label=variant_label(v, series[cfg][v]), **style(v))
        pow2_axis(ax, hs, "query heads H (d_head = d_model / H)")
        ax.set_xticklabels([f"{h}\n({dm // h})" for h in hs])
        ax.set_ylabel("time per call [ms] (median, log scale)")
        plain_log_y(ax)
        ax.set_title(f"{mode}, d_model={dm}, N={n}, batch {b}" + (", causal" if causal else ""), fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, title="variant", title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    fig.suptitle("The 'free lunch': same parameters and matmul FLOPs for every H, not the same time", y=1.02)
    fig.tight_layout()
    return figure_path(fig, figdir, "free_lunch"), configs, series, skipped


def along_high(r):
    """A row whose share of the peak measured alongside is above 100 % (peak_in_doubt says why)."""
    return bool(r.get("peak_in_doubt")) and (r.get("pct_peak_alongside") or 0) > 100


def perf_table(perf, peak):
    cases = [r for r in perf["cases"] if r["mode"] != "decode"]  # decode: in the decoding section
    fixed = ("variant", "precision", "mode", "family", "form", "d_model", "heads", "kv_heads", "n_q", "batch",
             "threads", "causal")
    more = varying_fields(perf, cases, fixed)  # every other field that tells two rows apart (W, d_head, ...)
    rows = []
    for r in cases:
        fam = r.get("family", "") + (f" {r['form']}" if r.get("form", "none") != "none" else "")
        rows.append([r["variant"], r.get("precision", "f32"), r["mode"], fam, r["d_model"], r["heads"], r["kv_heads"],
                     r["n_q"], r["batch"],
                     r["threads"],
                     "yes" if r["causal"] else "no"] + [field_text(r, name) for name, _ in more] +
                    [num(r.get("time_ms"), 4), num(r.get("gflops_matmul"), 3),
                     num(r.get("pct_peak"), 3) + (" †" if r.get("peak_in_doubt") and not along_high(r) else ""),
                     num(r.get("pct_peak_alongside"), 3) + (" †" if along_high(r) else ""),
                     r["status"] if r["status"] == "ok" else f"**{r['status']}**: {r.get('error', '')}"])
    table = md_table(["variant", "precision", "mode", "family", "d_model", "H", "G", "N", "batch", "threads", "causal"] +
                     [label for _, label in more] + ["time [ms]", "GFLOP/s (matmul)", "% of peak", "% of peak alongside", "status"], rows)
    if any(r.get("pct_peak_alongside") is not None for r in cases):
        table += ("\n\n% of peak: of `attnbench peak`'s FMA peak (peak.json, measured before the sweep); % of peak "
                  "alongside: of that peak times the FMA probe's rate in the same harness run over peak.json's "
                  "(`fma_drift` in perf.csv; a peer's from our harness's run of the same round), the machine's "
                  "ceiling in the minutes the row was timed.")
    doubt = [r for r in perf["cases"] if r["mode"] != "decode" and r.get("peak_in_doubt")]
    if doubt:
        table += (f"\n\n† {len(doubt)} rows: % of a peak that was measured low (the row is above 100 %, or other "
                  "processes kept half a CPU or more busy while `attnbench peak` ran: `peak_load_cpus` in perf.csv); "
                  "these shares overstate the kernel. Measure the peak again on a quiet machine. A † on the share "
                  "alongside: the FMA probe run beside the case was slowed where the case was not (`fma_drift`); read "
                  "that row's share of peak.json's peak, unless that peak too was measured under load "
                  "(`peak_load_cpus` >= 0.5).")
    return table


def free_lunch_table(configs, series):
    out = []
    for cfg in configs:
        hs = sorted({x for pts in series[cfg].values() for x, _ in pts})
        rows = []
        for v in sorted(series[cfg]):
            t = dict((h, r["time_ms"]) for h, r in series[cfg][v])
            base = t.get(hs[0])
            rows.append([variant_label(v, series[cfg][v])] + [num(t.get(h), 4) for h in hs] +
                        [f"{t[hs[-1]] / base:.2f}×" if base and hs[-1] in t else "–"])
        c = dict(cfg)
        out.append(f"{c.get('mode')}, d_model = {c.get('d_model')}, N = {c.get('n_q')}, batch {c.get('batch')}: "
                   "median time [ms] by H "
                   "(each variant at the most threads it ran with, a peer also at fewer where one of ours ran)\n\n"
                   + md_table(["variant"] + [f"H={h}" for h in hs] + [f"H={hs[-1]} / H={hs[0]}"], rows))
    return "\n\n".join(out)
