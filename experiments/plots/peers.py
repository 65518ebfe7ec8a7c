"""The report's peers and threads sections: which peers ran (library, version, threads, the
kernel that ran) or how to install the missing ones (peers.json), per shape our best variant's
median against each peer's with a Mann-Whitney U p-value over the repetitions (Google
Benchmark's compare machinery: gbench.report.calc_utest, the function `attnbench compare`'s
compare.py calls), and the threads sweep's speed-up and parallel efficiency."""
import glob
import json
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from perf import style  # noqa: E402
from plotting import field_text, md_table, num, rows_of, shape_fields, varying_fields  # noqa: E402


def shape_of(perf):
    """The fields two providers' cases must share to be compared: the shape's and the threads."""
    return shape_fields(perf) + ("threads",)


def is_peer(r):
    return isinstance(r.get("peer"), dict)


def peer_names(perf):
    return {r["variant"] for r in perf["cases"] if is_peer(r)}


def measured(r):
    """The time a row is compared by: a decode case's attention core (a peer's decode is its core
    alone), the whole call otherwise."""
    return r.get("core_time_ms") if r["mode"] == "decode" else r.get("time_ms")


def utest():
    """gbench.report.calc_utest from libbenchmark-tools' compare.py, or None."""
    tool = os.environ.get("ATTNBENCH_GBENCH_COMPARE", "/usr/share/benchmark/compare.py")
    sys.path.insert(0, os.path.dirname(tool))
    try:
        from gbench import report
        return report.calc_utest
    except ImportError:
        return None


def repetitions(d, case_id, decode):
    """Per repetition (real ms, cpu ms) of a stored case."""
    try:
        with open(os.path.join(d, "cases", case_id + ".json")) as f:
            rec = json.load(f)
    except OSError:
        return [], []
    reps = rec.get("core_repetitions" if decode else "repetitions", [])
    return [x["time_ms"] for x in reps], [x["cpu_time_ms"] for x in reps]


def rate(r):
    """' (GFLOP/s, % of peak)' of a core or layer row, '' without those figures."""
    g, pct = r.get("gflops_matmul"), r.get("pct_peak")
    return f" ({g:.1f}, {pct:.0f}%)" if g and pct and r["mode"] != "decode" else ""


def section(d, perf):
    info = None
    try:
        with open(os.path.join(d, "peers.json")) as f:
            info = json.load(f)
    except OSError:
        pass
    rows = [r for r in (perf or {}).get("cases", []) if r["status"] == "ok" and measured(r)]
    peers = [r for r in rows if is_peer(r)]
    if not info and not peers:
        return ""
    md = ["## Versus peers\n"]
    for m in (info or {}).get("missing", []):
        md.append(f"- {m['message']}\n")
    for m in (info or {}).get("not_served", []):
        md.append(f"- {m['provider']}: not served in {m['precision']} ({m['message']}); those cases have no peer.\n")
    libs = {}
    for r in peers:
        p = r["peer"]
        libs.setdefault((r["variant"], p.get("library"), p.get("version"), p.get("op"), p.get("kernel")),
                        set()).add(r["threads"])
    if libs:
        md.append("Each peer's output was checked against the fp64 reference on the first case of every shape "
                  "(`attnbench peer-io --judge`, the suite's tolerance policy) before it was timed. A peer's decode "
                  "case is its attention over the cache alone, compared with our decode core (`ID/core`).\n")
        md.append(md_table(["peer", "library", "version", "operator", "kernel that ran", "threads"],
                           [[v, lib, ver, op, kern, ", ".join(map(str, sorted(ts))) + " (intra-op)"]
                            for (v, lib, ver, op, kern), ts in sorted(libs.items(), key=lambda x: x[0][0])]) + "\n")
    calc = utest()
    ours = defaultdict(list)
    keyed = shape_of(perf)
    for r in rows:
        if not is_peer(r):
            ours[tuple(r.get(k) for k in keyed)].append(r)
    table = []
    covered = ("variant", "mode", "threads", "d_model", "heads", "kv_heads", "context", "n_q", "batch", "causal",
               "precision", "family", "form", "kv_lora_rank", "q_lora_rank", "qk_rope_head_dim", "d_head", "d_v")
    more = varying_fields(perf, peers, covered)  # what else tells two of its rows apart (W, the device, ...)
    for r in sorted(peers, key=lambda r: (r["mode"], r["variant"], [str(r.get(k)) for k in keyed])):
        key = tuple(r.get(k) for k in keyed)
        if not ours.get(key):
            continue
        best = min(ours[key], key=measured)
        decode = r["mode"] == "decode"
        p = "–"
        if calc:
            a, b = repetitions(d, best["id"], decode), repetitions(d, r["id"], decode)
            if a[0] and b[0]:
                _, _, pt = calc([a[1], b[1]], [a[0], b[0]])
                p = (num(pt, 2) if pt is not None else "–") + f" ({len(a[0])} vs {len(b[0])})"
        shape = f"d_model={r['d_model']} H={r['heads']}" + (f" G={r['kv_heads']}" if r["kv_heads"] != r["heads"] else "")
        shape += f" L={r['context']}" if decode else f" N={r['n_q']}"
        shape += f" B={r['batch']}" + (" causal" if r["causal"] and not decode else "")
        shape += f" {r['precision']}" if r.get("precision", "f32") != "f32" else ""
        if r.get("family") == "mla":  # MLA's widths and form (its two forms share the other fields)
            shape += (f" MLA {r.get('form')} d_c={r.get('kv_lora_rank')} d_c'={r.get('q_lora_rank')} "
                      f"d_h^R={r.get('qk_rope_head_dim')} d_head={r['d_head']} d_v={r.get('d_v') or r['d_head']}")
        shape += "".join(f" {label}={field_text(r, name)}" for name, label in more)
        ceiling = r.get("ceiling_speedup")
        spread = best.get("round_spread")
        table.append([r["mode"], shape, r["threads"], f"{best['variant']} {num(measured(best), 4)}" + rate(best),
                      f"{r['variant']} {num(measured(r), 4)}" + rate(r), f"{measured(r) / measured(best):.2f}×",
                      f"{100 * spread:.0f}% ({best.get('rounds')})" if spread is not None else "–",
                      f"{ceiling:.2f}×" if ceiling else "–", p])
    if table:
        md.append("Per shape and thread count: our fastest variant's median time and each peer's, the peer's over "
                  "ours (above 1×: we are faster), and the two-sided Mann–Whitney U p-value of the wall times over "
                  "the repetitions (their counts in brackets; with n a side the smallest p possible is "
                  "2/C(2n, n): 0.33 for 2, 0.1 for 3, 0.008 for 5). Ours and the peers ran in alternating rounds "
                  "(ours, peer, ours, peer ...), each side's time the median of its rounds' medians, so the "
                  "machine's drift hits both; our rounds' spread ((slowest − fastest) / median; the rounds in "
                  "brackets) says how far drift alone moved us: a ratio nearer 1 than that spread does not rank "
                  "the two. In brackets after the times: GFLOP/s of the counted matmul FLOPs and % of the "
                  "measured peak at that thread count (core, layer; fp32 FMA, bf16 the CPU's bf16 product where it "
                  "has one: AMX tiles, else vdpbf16ps). Ceiling: the measured peak over the "
                  "peer's GFLOP/s, the largest peer / ours any implementation of the counted FLOPs could reach on "
                  "this machine (attn::ceiling_speedup).\n")
        md.append(md_table(["mode", "shape", "threads", "ours [ms] (GFLOP/s, % peak)", "peer [ms] (GFLOP/s, % peak)",
                            "peer / ours", "our rounds' spread", "ceiling", "U-test p"], table) + "\n")
    return "\n".join(md)


def threads_figure(figdir, perf, save):
    """Speed-up over 1 thread and parallel efficiency (speed-up / threads) for every shape run at
    two or more thread counts; None when there is none."""
    series = defaultdict(dict)
    keys = shape_fields(perf)
    names = {k: i for i, k in enumerate(keys)}
    for r in rows_of(perf, "threads"):
        if r["status"] == "ok" and measured(r):
            shape = tuple(r.get(k) for k in keys)
            series[(r["variant"],) + shape][r["threads"]] = r
    lines = {k: v for k, v in series.items() if len(v) >= 2 and 1 in v}
    # the shapes where one of our variants ran at several thread counts (the threads grids), each
    # with the peers that ran on it; a peer's 1-thread cases elsewhere only follow our 1-thread variants
    swept = {k[1:] for k in lines if k[0] not in peer_names(perf)}
    lines = {k: v for k, v in lines.items() if k[1:] in swept}
    if not lines:
        return None, ""
    # one panel per mode: shapes along x, a bar per provider and thread count above 1 (peers
    # hatched), its height the parallel efficiency; the speed-up is the bar's label
    ts_all = sorted({t for v in lines.values() for t in v})
    at = lambda s, k: s[names[k]] if k in names else None  # noqa: E731  (a shape's field)
    modes = sorted({at(k[1:], "mode") for k in lines})
    provs = sorted({k[0] for k in lines})
    peers = peer_names(perf)
    rows = []
    widths = [max(4.5, 1.5 + 1.1 * len({k[1:] for k in lines if at(k[1:], "mode") == m})) for m in modes]
    fig, axes = plt.subplots(1, len(modes), figsize=(sum(widths), 4.8), squeeze=False,
                             gridspec_kw={"width_ratios": widths})
    for ax, mode in zip(axes[0], modes):
        keys = sorted({k[1:] for k in lines if at(k[1:], "mode") == mode}, key=lambda s: [str(x) for x in s])
        bars = [(p, t) for p in provs for t in ts_all[1:] if any(t in lines.get((p,) + s, {}) for s in keys)]
        width = 0.8 / max(1, len(bars))
        labels = []
        for i, s in enumerate(keys):
            dm, h, g, n, ctx, b, causal = (at(s, k) for k in ("d_model", "heads", "kv_heads", "n_q", "context", "batch",
                                                             "causal"))
            shape = f"H={h}" + (f" G={g}" if g != h else "") + (f"\nL={ctx}" if mode == "decode" else f"\nN={n}")
            shape += (f" B={b}" if b != 1 else "") + (" causal" if causal and mode != "decode" else "")
            labels.append(shape + (f"\nd_model={dm}" if dm != 512 else ""))
            for j, (p, t) in enumerate(bars):
                v = lines.get((p,) + s)
                if not v or t not in v:
                    continue
                sp, eff = v[t].get("speedup_vs_1_thread"), v[t].get("parallel_efficiency")  # the C++'s
                if sp is None or eff is None:
                    continue
                st = style(p)
                bar = ax.bar(i + (j - (len(bars) - 1) / 2) * width, eff, width * 0.95, color=st["color"],
                             hatch="//" if p in peers else None, edgecolor="white" if p in peers else None,
                             label=f"{p}, {t} threads" + (" (peer)" if p in peers else "") if i == 0 or
                             not any((p,) + k in lines for k in keys[:i]) else None)
                ax.bar_label(bar, labels=[f"{sp:.2f}×"], fontsize=6, rotation=90, padding=2,
                             bbox=dict(facecolor="white", edgecolor="none", pad=0.5))  # over the ideal line
        for s in keys:
            for p in provs:
                v = lines.get((p,) + s)
                if v:
                    dm, h, g, n, ctx = (at(s, k) for k in ("d_model", "heads", "kv_heads", "n_q", "context"))
                    shape = f"d_model={dm} H={h}" + (f" G={g}" if g != h else "")
                    shape += f" L={ctx}" if mode == "decode" else f" N={n}"
                    top = v[max(v)]
                    sp, eff = top.get("speedup_vs_1_thread"), top.get("parallel_efficiency")
                    rows.append([p, mode, shape] + [num(measured(v[t]), 4) if t in v else "–" for t in ts_all] +
                                [f"{sp:.2f}× ({100 * eff:.0f}%)" if sp is not None and eff is not None else "–"])
        ax.axhline(1.0, color="black", ls=":", lw=1)
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(labels, fontsize=7)
        top = max([v[t].get("parallel_efficiency") or 0 for k, v in lines.items() if at(k[1:], "mode") == mode
                   for t in v] + [1.0])
        ax.set_ylim(0, top * 1.25)
        ax.set_ylabel("parallel efficiency: speed-up / threads")
        ax.set_title(f"{mode} (bar labels: speed-up over 1 thread)", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    fig.suptitle("Threads sweep: parallel efficiency (median times; hatched: peers; dotted: ideal)", y=1.02)
    fig.tight_layout()
    path = save(fig, figdir, "threads_efficiency")
    table = md_table(["provider", "mode", "shape"] + [f"{t} thr [ms]" for t in ts_all] +
                     [f"speed-up at {ts_all[-1]} (efficiency)"], rows)
    return path, table
