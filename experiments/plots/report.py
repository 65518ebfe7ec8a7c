#!/usr/bin/env python3
"""Plots and report.md of one `attnbench report` run, from the files it stored.

    python3 experiments/plots/report.py results/<run-id>

(`attnbench plot results/<run-id>` runs this after re-aggregating cases/ into perf.json.)
Nothing is measured or computed here beyond medians' ratios: the numbers come from the run's
JSON. Figures go to results/<run-id>/figures/ as PNG and SVG; report.md embeds the PNGs.
"""
import json
import math
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plotting  # noqa: E402
import claims  # noqa: E402  (the params / FLOPs / hull plots)
import decode as decode_plots  # noqa: E402  (the decode figures)
import decode_text  # noqa: E402  (the decode section's tables and prose)

# Plot styles are derived, not listed per name: each variant of a run gets the next colour and
# marker in sorted order (assign_styles), so a newly registered variant needs no edit here.
COLORS = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
          "tab:gray", "tab:olive", "tab:cyan"]
MARKERS = ["o", "v", "^", "s", "D", "P", "X", "*"]
_styles = {}


def assign_styles(names):
    for i, v in enumerate(sorted(set(names))):
        _styles[v] = dict(color=COLORS[i % len(COLORS)], marker=MARKERS[i % len(MARKERS)])


def style(variant):
    if variant not in _styles:
        i = len(_styles)
        _styles[variant] = dict(color=COLORS[i % len(COLORS)], marker=MARKERS[i % len(MARKERS)])
    return _styles[variant]


def load(d, name):
    path = os.path.join(d, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def save(fig, figdir, stem):
    plotting.save(fig, figdir, stem, quiet=True)
    return f"figures/{stem}.png"


def plain_log_y(ax):
    """Log y axis with plain tick labels (0.04, not 4x10^-2); call after plotting. Within three
    decades the ticks are 1, 2, (3,) 5 x 10^k, so every panel has several labelled ticks."""
    ax.set_yscale("log")
    lo, hi = ax.get_ylim()
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _pos: f"{v:g}")
    if hi / lo < 30:  # little more than a decade: 1, 2, 3, 5 x 10^k so the bottom is labelled too
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 3.0, 5.0)))
    elif hi / lo < 1e3:
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(fmt)
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_ylim(lo, hi)


def pow2_axis(ax, values, label):
    ax.set_xscale("log", base=2)
    ax.set_xticks(values)
    ax.set_xticklabels([str(v) for v in values])
    ax.minorticks_off()
    ax.set_xlabel(label)


# --- performance -----------------------------------------------------------------------------

# A panel's fixed sizes; the thread count is not one of them: each variant is drawn at the most
# threads it ran with (single-threaded variants at 1), and its legend entry says how many.
CONFIG_KEYS = ("mode", "d_model", "heads", "kv_heads", "batch", "causal", "context")


def threads_of(r):
    return r["threads"]


def variant_label(v, pts):
    t = threads_of(pts[0][1])
    return f"{v} ({t} thread{'s' if t != 1 else ''})"


def config_text(c):
    mode, d, h, g, b, causal, ctx = c
    s = f"{mode}, d_model={d}, H={h}"
    if g != h:
        s += f", G={g}"
    s += f", batch {b}"
    if causal:
        s += ", causal"
    if mode == "decode":
        s += f", context {ctx}"
    return s


def ok_rows(perf):
    return [r for r in perf["cases"] if r["status"] == "ok" and r.get("time_ms")]


def series_over(rows, x_key, fixed_keys):
    """{config: {variant: [(x, row)]}} for configs (the fixed_keys) with >= 2 distinct x values;
    each variant at the most threads it ran with in that config."""
    groups = defaultdict(lambda: defaultdict(list))
    for r in rows:
        groups[tuple(r[k] for k in fixed_keys)][r["variant"]].append((r[x_key], r))
    for by_variant in groups.values():
        for v, pts in by_variant.items():
            most = max(threads_of(r) for _, r in pts)
            by_variant[v] = [(x, r) for x, r in pts if threads_of(r) == most]
    out = {}
    for cfg, by_variant in groups.items():
        xs = {x for pts in by_variant.values() for x, _ in pts}
        if len(xs) >= 2:
            out[cfg] = {v: sorted(pts, key=lambda p: p[0]) for v, pts in by_variant.items()}
    return out


def pick_configs(series):
    """Per mode, the configuration with the most points (ties: larger d_model)."""
    best = {}
    for cfg, by_variant in series.items():
        npts = sum(len(p) for p in by_variant.values())
        score = (npts, cfg[1])
        if cfg[0] not in best or score > best[cfg[0]][0]:
            best[cfg[0]] = (score, cfg)
    return [best[m][1] for m in sorted(best)]


def peak_for(peak, threads):
    """The measured FMA ceiling (GFLOP/s) at this thread count, and its label."""
    if not peak:
        return None, None
    p = peak["peak"]
    if threads == 1:
        return p["fma_f32_gflops_1_thread"]["median"], "1-thread"
    if threads == p["threads"]:
        return p["fma_f32_gflops_all_threads"]["median"], f"{threads}-thread"
    return None, None


def plot_vs_n(d, figdir, perf, peak):
    """time, GFLOP/s and % of peak against N, one panel per mode, one line per variant."""
    series = series_over(ok_rows(perf), "n_q", CONFIG_KEYS)
    configs = pick_configs(series)
    if not configs:
        return []
    figures = []
    for metric, stem, ylabel, title in (
        ("time_ms", "perf_time_vs_n", "time per call [ms] (median)", "Time against sequence length"),
        ("gflops_matmul", "perf_gflops_vs_n", "matmul-only rate [GFLOP/s] (median)", "Throughput against sequence length"),
        ("pct_peak", "perf_pct_peak_vs_n", "share of the measured FMA peak [%]", "Share of this machine's peak"),
    ):
        fig, axes = plt.subplots(1, len(configs), figsize=(6.2 * len(configs), 4.6), squeeze=False)
        for ax, cfg in zip(axes[0], configs):
            ns = sorted({x for pts in series[cfg].values() for x, _ in pts})
            for v in sorted(series[cfg]):
                pts = [(x, r[metric]) for x, r in series[cfg][v] if r.get(metric) is not None]
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
                    gf, which = peak_for(peak, t)
                    if gf:
                        ax.axhline(gf, color="red", ls=ls, lw=1.2, label=f"measured {which} FMA peak ({gf:.0f})")
                        top = max(top, gf)
                ax.set_ylim(0, top * 1.08)
            if metric == "pct_peak":
                ax.axhline(100, color="red", ls="--", lw=1.2, label="measured FMA peak\n(at each variant's threads)")
                ax.set_ylim(0, 110)
            if metric == "time_ms":
                plain_log_y(ax)  # after plotting: the data set the limits
            ax.set_ylabel(ylabel)
            ax.set_title(config_text(cfg), fontsize=10)
            ax.grid(True, which="major", alpha=0.3)
            ax.legend(fontsize=8, title="variant", title_fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
        fig.suptitle(f"{title} (fp32, attention {'/'.join(c[0] for c in configs)})", y=1.02)
        fig.tight_layout()
        figures.append((stem, save(fig, figdir, stem), [config_text(c) for c in configs]))
    return figures


def plot_free_lunch(d, figdir, perf):
    """time against H at fixed d_model and N: the parameters and matmul FLOPs stay put."""
    keys = ("mode", "d_model", "n_q", "batch", "causal", "context")
    rows = [r for r in ok_rows(perf) if r["kv_heads"] == r["heads"]]
    series = series_over(rows, "heads", keys)
    if not series:
        return None
    best = {}
    for cfg, by_v in series.items():
        npts = sum(len(p) for p in by_v.values())
        if cfg[0] not in best or (npts, cfg[1]) > best[cfg[0]][0]:
            best[cfg[0]] = ((npts, cfg[1]), cfg)
    configs = [best[m][1] for m in sorted(best, key=lambda m: m != "layer")]
    fig, axes = plt.subplots(1, len(configs), figsize=(6.4 * len(configs), 4.8), squeeze=False)
    for ax, cfg in zip(axes[0], configs):
        mode, dm, n, b, causal, ctx = cfg
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
    return save(fig, figdir, "free_lunch"), configs, series


# --- markdown ----------------------------------------------------------------------------------

def figures_md(figs, prefix=""):
    """Markdown image lines for the figures (stem -> path) whose stem starts with prefix."""
    return [f"![{stem}]({path})\n" for stem, path in figs.items() if stem.startswith(prefix)]


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |")
    return "\n".join(out)


def num(v, digits=3):
    if v is None:
        return "–"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return str(v)
    return f"{v:.{digits}g}" if abs(v) < 1e4 else f"{v:,.0f}"


def check_section(check):
    if not check:
        return "Not run in this sweep.\n"
    by = defaultdict(lambda: [0, 0, 0.0])
    for c in check.get("cases", []):
        k = (c["variant"], c["precision"], c["mode"])
        by[k][0] += 1
        by[k][1] += 0 if c["pass"] else 1
        by[k][2] = max(by[k][2], c.get("error_over_bound") or 0.0)
    rows = [[v, p, m, n, f, f"{w:.3f}", "**FAIL**" if f else "pass"] for (v, p, m), (n, f, w) in sorted(by.items())]
    ids = check.get("identities", [])
    idf = sum(1 for i in ids if not i["pass"])
    failed = sorted({c["variant"] for c in check.get("cases", []) if not c["pass"]})
    s = ("Every timed variant is first held to the fp64 reference (`attnbench check`; per element "
         "|out − ref| ≤ u · bound, err/bound ≤ 1 passes).\n\n")
    s += md_table(["variant", "precision", "mode", "cases", "failed", "worst err/bound", "verdict"], rows) + "\n\n"
    s += f"Identities of the fp64 reference: {len(ids) - idf} of {len(ids)} hold.\n"
    if failed:
        s += f"\n**Failed check, so not timed in this report: {', '.join(failed)}.**\n"
    return s


def params_section(params):
    if not params:
        return "Not run in this sweep.\n"
    rows = []
    for r in params["rows"]:
        if r["d_model"] == 512 and not r["bias"]:
            rows.append([r["label"], r["heads"], r["kv_heads"], r["d_head"], f"{r['closed_form']['total']:,}",
                         f"{r['measured']:,}", f"{r['ratio_to_mha']:.3f}"])
    s = ("Parameters of one layer at d_model = 512 without biases: closed form against the elements the "
         "weights allocate (every row of params.csv agrees: " + ("yes" if params.get("all_agree") else "**NO**") + ").\n\n")
    return s + md_table(["family", "H", "G", "d_head", "closed form", "allocated", "vs MHA"], rows) + "\n"


def flops_section(flops):
    if not flops:
        return "Not run in this sweep.\n"
    p = flops["problem"]
    t = flops["totals"]
    s = (f"One layer, {p['describe']}: {t['matmul_only']:,} matmul-only FLOPs, {t['full']:,} counting every "
         f"operation; analytic = counted on {flops['grid']['equal']} of {flops['grid']['cases']} grid cases.\n\n")
    s += "Sequence length at which the attention stages' FLOPs overtake the projections':\n\n"
    rows = [[x["family"], "yes" if x["causal"] else "no", f"{x['matmul_closed_form']:.1f}", x["matmul_first_n"],
             f"{x['full_closed_form']:.1f}", x["full_first_n"]] for x in flops["crossover"]]
    return s + md_table(["family", "causal", "matmul-only N*", "first N", "full N*", "first N"], rows) + "\n"


def perf_table(perf, peak):
    rows = []
    for r in perf["cases"]:
        if r["mode"] == "decode":  # in the decoding section
            continue
        rows.append([r["variant"], r["mode"], r["d_model"], r["heads"], r["kv_heads"], r["n_q"], r["batch"],
                     r["threads"],
                     "yes" if r["causal"] else "no",
                     num(r.get("time_ms"), 4), num(r.get("gflops_matmul"), 3), num(r.get("pct_peak"), 3),
                     r["status"] if r["status"] == "ok" else f"**{r['status']}**: {r.get('error', '')}"])
    return md_table(["variant", "mode", "d_model", "H", "G", "N", "batch", "threads", "causal", "time [ms]",
                     "GFLOP/s (matmul)", "% of peak", "status"], rows)


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
        out.append(f"{cfg[0]}, d_model = {cfg[1]}, N = {cfg[2]}, batch {cfg[3]}: median time [ms] by H "
                   "(each variant at the most threads it ran with)\n\n"
                   + md_table(["variant"] + [f"H={h}" for h in hs] + [f"H={hs[-1]} / H={hs[0]}"], rows))
    return "\n\n".join(out)


def claims_section(cl):
    if not cl:
        return "Not run in this sweep.\n"
    s = cl["summary"]
    out = (f"{s['total']} quantitative claims of the seed documents, each checked by a command: "
           f"{s['confirmed']} confirmed, {s['qualified']} hold with qualification, {s['refuted']} refuted. "
           "The full ledger, with what was measured and why, is [claims.md](claims.md).\n\n")
    # the verdict keys attnbench claims writes (attn::claims::key); an unknown one is an error
    verdict = {"confirmed": "confirmed", "qualified": "holds with qualification", "refuted": "**refuted**"}
    rows = [[c["id"], c["claim"], c["source"], f"`{c['command']}`", verdict[c["verdict"]]]
            for c in cl["claims"]]
    return out + md_table(["id", "claim (paraphrased)", "source", "checked by", "verdict"], rows) + "\n"


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "."
    figdir = os.path.join(d, "figures")
    run = load(d, "run.json") or {}
    meta = load(d, "metadata.json") or {}
    peak, perf, check = load(d, "peak.json"), load(d, "perf.json"), load(d, "check.json")
    params, flops, cl = load(d, "params.json"), load(d, "flops.json"), load(d, "claims.json")
    stages = {}
    for s in run.get("stages", []):
        st = load(d, os.path.join("stages", f"{s}.json"))
        stages[s] = st

    # the parameter, FLOP and hull plots, written into figures/ (claims.save writes next to its input otherwise)
    claim_figs = {}  # stem -> path, as claims.py drew them

    def save_claim(fig, _d, stem):
        claim_figs[stem] = save(fig, figdir, stem)

    claims.save = save_claim
    if params:
        claims.plot_params(d)
    if flops:
        claims.plot_flops_vs_n(d)
        claims.plot_flops_vs_heads(d)
    if load(d, "hull.json"):
        claims.plot_hull(d)

    if perf:
        assign_styles(r["variant"] for r in perf["cases"])
    perf_figs = plot_vs_n(d, figdir, perf, peak) if perf else []
    lunch = plot_free_lunch(d, figdir, perf) if perf else None

    md = [f"# attnbench report: {run.get('run_id', os.path.basename(os.path.abspath(d)))}\n"]
    md.append(f"Sweep **{run.get('preset', '?')}** ({run.get('sweep_source', '?')}), started "
              f"{run.get('started_utc', '?')} on {meta.get('cpu_model', '?')} ({meta.get('logical_cores', '?')} logical "
              f"CPUs), commit {meta.get('commit', '?')}. fp32 unless noted; times are medians over "
              "Google Benchmark repetitions.\n")
    md.append("## How to reproduce\n")
    cmd = " ".join(run.get("command", ["attnbench", "report"]))
    md.append("```sh\nbash scripts/build.sh release            # set up and build\n"
              f"build/release/{cmd}\n"
              f"# or, with this run's own sweep file:\nbuild/release/attnbench report --sweep {os.path.join(d, 'sweep.toml')}\n"
              f"# re-render plots and this file from the stored results:\nbuild/release/attnbench plot {d}\n```\n")
    md.append("## Stages\n")
    rows = []
    for s in run.get("stages", []):
        st = stages.get(s)
        rows.append([s, "not finished" if not st else ("ok" if st["ok"] else "**failed**"),
                     f"{st['seconds']:.1f}" if st else "–"])
    md.append(md_table(["stage", "status", "seconds"], rows) + "\n")
    if peak:
        p = peak["peak"]
        md.append(f"Measured ceilings (`attnbench peak`, medians): fp32 FMA {p['fma_f32_gflops_1_thread']['median']:.1f} "
                  f"GFLOP/s on 1 thread, {p['fma_f32_gflops_all_threads']['median']:.1f} GFLOP/s on {p['threads']}; "
                  f"triad {p['triad_gbs_1_thread']['median']:.1f} / {p['triad_gbs_all_threads']['median']:.1f} GB/s. "
                  "Every % of peak below refers to the FMA figure at the case's thread count.\n")
        busy = max(p[k].get("others_busy_cpus", 0) or 0 for k in ("fma_f32_gflops_1_thread", "fma_f32_gflops_all_threads"))
        if busy > 0.1:
            md.append(f"**Note:** other processes kept about {busy:.1f} CPUs busy while the peak was measured (load "
                      f"average {meta.get('load_average', '?')} at the start): the ceilings, and the timings, are those "
                      "of a shared machine. Rerun on a quiet machine for figures to quote.\n")

    md.append("## Correctness first\n")
    md.append(check_section(check))

    md.append("## Performance\n")
    if perf and perf["cases"]:
        n_ok = sum(1 for r in perf["cases"] if r["status"] == "ok")
        md.append(f"{len(perf['cases'])} cases, {n_ok} ok"
                  + (f", {len(perf['cases']) - n_ok} failed or skipped (listed in the table with their errors)"
                     if n_ok < len(perf["cases"]) else "") + ".\n")
        for stem, path, cfgs in perf_figs:
            md.append(f"![{stem}]({path})\n")
        if lunch:
            path, configs, series = lunch
            md.append("### The free lunch\n")
            md.append("Splitting d_model into more, narrower heads keeps the parameters (4·d_model²) and the matmul "
                      "FLOPs constant; the time is another matter: each head's matmuls get thinner (d_head shrinks), so "
                      "arithmetic intensity per head drops, and the softmax work grows with H·N².\n")
            md.append(f"![free_lunch]({path})\n")
            md.append(free_lunch_table(configs, series) + "\n")
        if any(r["mode"] != "decode" for r in perf["cases"]):
            md.append("### Medians, every case\n")
            if any(r["mode"] == "decode" for r in perf["cases"]):
                md.append("Decode cases are in their own section below.\n")
            md.append(perf_table(perf, peak) + "\n")
    else:
        md.append("Not run in this sweep.\n")

    dec = decode_plots.Decode(perf, meta) if perf else None
    if dec and (dec.rows or dec.failed):
        decode_figs = {}

        def save_decode(fig, _d, stem):
            decode_figs[stem] = save(fig, figdir, stem)

        decode_plots.save = save_decode
        if dec.rows:
            decode_plots.plot_all(dec, figdir)
        md.append(decode_text.section(dec, peak, figures_md(decode_figs)))

    md.append("## Parameters\n")
    md += figures_md(claim_figs, "params")
    md.append(params_section(params))
    md.append("## FLOPs\n")
    md += figures_md(claim_figs, "flops")
    md.append(flops_section(flops))
    md.append("## Claims ledger\n")
    md += figures_md(claim_figs, "hull")
    md.append(claims_section(cl))
    md.append("## Machine and build\n")
    md.append(md_table(["key", "value"], [[k, f"`{v}`" if k in ("flags", "cpu_simd_flags") else v]
                                         for k, v in meta.items()]) + "\n")
    md.append("Files of this run (JSON and CSV per stage, one JSON per performance case under cases/) are "
              "described in results/README.md.\n")
    text = "\n".join(md)
    tmp = os.path.join(d, ".report.md.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(d, "report.md"))


if __name__ == "__main__":
    main()
