#!/usr/bin/env python3
"""Plots for the parameter/FLOP argument and the hull experiment, and the claims ledger's
Markdown (claims.md).

Reads the JSON that `attnbench params|flops|hull|claims --out DIR` wrote and writes PNG and SVG
(and claims.md) next to it. A separate, re-runnable step: no numbers are computed here, only
drawn and worded.

    python3 experiments/plots/claims.py results/claims
"""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import plotting  # noqa: E402
import matplotlib.ticker  # noqa: E402

FAMILY_STYLE = {
    "single-head": dict(color="black", marker="s"),
    "MHA": dict(color="tab:blue", marker="o"),
    "MQA": dict(color="tab:orange", marker="v"),
    "GQA": dict(color="tab:green", marker="^"),
    "wide": dict(color="tab:red", marker="D"),
}


def human(v, _pos=None):
    """1048576 -> '1.05M': readable tick labels on log axes."""
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}"


def heads_axis(ax, hs):
    ax.set_xscale("log", base=2)
    ax.set_xticks(hs)
    ax.set_xticklabels([str(h) for h in hs])
    ax.minorticks_off()


def load(d, name):
    with open(os.path.join(d, name)) as f:
        return json.load(f)


def save(fig, d, stem):
    plotting.save(fig, d, stem)


def plot_params(d):
    j = load(d, "params.json")
    rows = [r for r in j["rows"] if not r["bias"]]
    dms = sorted({r["d_model"] for r in rows})
    fig, axes = plt.subplots(1, len(dms), figsize=(4.2 * len(dms), 3.8), squeeze=False)
    fig.subplots_adjust(wspace=0.38)
    for ax, dm in zip(axes[0], dms):
        single = [r for r in rows if r["d_model"] == dm and r["family"] == "single-head"]
        base = single[0]["closed_form"]["total"] if single else None
        labels = sorted({r["label"] for r in rows if r["d_model"] == dm and r["family"] != "single-head"},
                        key=lambda s: ["MHA", "GQA", "MQA", "wide"].index(s.split(":")[0]))
        for lab in labels:
            pts = sorted((r["heads"], r["closed_form"]["total"]) for r in rows
                         if r["d_model"] == dm and r["label"] == lab)
            if base is not None:
                pts = [(1, base)] + pts  # every family is the single head at H = 1
            fam = lab.split(":")[0]
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=lab if lab != "wide" else
                    "wide (H heads, each d_model wide)", **FAMILY_STYLE[fam])
        if base is not None:
            ax.plot([1], [base], linestyle="none", label="single head (H = 1)", **FAMILY_STYLE["single-head"])
        heads_axis(ax, sorted({r["heads"] for r in rows}))
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(human))
        ax.set_title(f"d_model = {dm}")
        ax.set_xlabel("heads H")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("parameters (weights, no bias)")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=9, bbox_to_anchor=(0.5, -0.08))
    fig.suptitle("Parameters of one attention layer vs heads: MHA stays at 4·d_model², "
                 "the wide counterfactual grows as H", y=1.03)
    save(fig, d, "params_vs_heads")


def stage_groups(stages):
    proj = sum(stages[s]["full"] for s in ("proj_q", "proj_k", "proj_v", "proj_o"))
    soft = sum(stages[s]["full"] for s in ("scale", "softmax_max", "softmax_exp", "softmax_sum", "softmax_div"))
    return {"projections (Q, K, V, O)": proj, "QKᵀ": stages["qk"]["full"],
            "scale + softmax": soft, "P·V": stages["pv"]["full"]}


def plot_flops_vs_n(d):
    j = load(d, "flops.json")
    p = j["problem"]
    ns = [r["n"] for r in j["vs_n"]]
    groups = [stage_groups(r["stages"]) for r in j["vs_n"]]
    fig, ax = plt.subplots(figsize=(7, 4.6))
    styles = {"projections (Q, K, V, O)": ("tab:blue", "-", 1.5), "QKᵀ": ("tab:orange", "-", 5),
              "scale + softmax": ("tab:green", ":", 1.5), "P·V": ("tab:red", "--", 1.5)}
    for name, (c, ls, lw) in styles.items():
        label = name + (" (nearly equal to QKᵀ)" if name == "P·V" else "")
        ax.plot(ns, [g[name] for g in groups], color=c, ls=ls, lw=lw, alpha=0.5 if lw > 2 else 1,
                marker="o", ms=3, label=label)
    att = [r["attention_full"] for r in j["vs_n"]]
    ax.plot(ns, att, color="black", lw=2, label="attention stages, total (QKᵀ … P·V)")
    fam = "MHA" if p["kv_heads"] == p["heads"] and p["heads"] > 1 else None
    xs = [x for x in j["crossover"] if x["causal"] == p["causal"] and x["kv_heads"] == p["kv_heads"]
          and x["heads"] == p["heads"] and x["d_head"] == p["d_head"]]
    if xs:
        x = xs[0]
        ax.axvline(x["full_closed_form"], color="gray", lw=1)
        proj = [g["projections (Q, K, V, O)"] for g in groups]
        # projections are linear in N: their value at N* is read off the slope
        y_star = proj[0] / ns[0] * x["full_closed_form"]
        ax.plot([x["full_closed_form"]], [y_star], "k*", ms=12, zorder=5)
        ax.annotate(f"crossover N* = {x['full_closed_form']:.1f} tokens\n(full count; matmul-only: "
                    f"{x['matmul_closed_form']:.0f})", xy=(x["full_closed_form"], min(att)),
                    xytext=(8, 10), textcoords="offset points", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(ns)
    ax.set_xticklabels([str(n) for n in ns], rotation=45)
    ax.minorticks_off()
    ax.set_yscale("log")
    ax.set_xlabel("sequence length N = N_q = N_kv (tokens)")
    ax.set_ylabel("FLOPs per layer (full count)")
    title = (f"FLOPs by stage vs sequence length ({fam or 'family'}, d_model={p['d_model']}, "
             f"H={p['heads']}, batch {p['batch']}{', causal' if p['causal'] else ''})")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    save(fig, d, "flops_vs_n")


def plot_flops_vs_heads(d):
    j = load(d, "flops.json")
    p = j["problem"]
    hs = [r["heads"] for r in j["vs_heads"]]
    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    ax.plot(hs, [r["matmul_only"] / 1e9 for r in j["vs_heads"]], "o-", label="matmul-only (2 FLOPs per multiply-add)")
    ax.plot(hs, [r["full"] / 1e9 for r in j["vs_heads"]], "s-", label="full count (every add, mul, div, exp, cmp)")
    heads_axis(ax, hs)
    ax.set_xlabel("heads H (d_head = d_model / H)")
    ax.set_ylabel("FLOPs per layer (10⁹)")
    ax.set_title(f"Same matmuls, more softmax: d_model={p['d_model']}, N={p['n_q']}", fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax2.plot(hs, [r["scale_softmax"] / 1e6 for r in j["vs_heads"]], "^-", color="tab:green")
    heads_axis(ax2, hs)
    ax2.set_yscale("log", base=2)
    ax2.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _p: f"{v:g}"))
    ax2.set_xlabel("heads H")
    ax2.set_ylabel("scale + softmax FLOPs (10⁶)")
    ax2.set_title("The part that grows: ∝ H·N_q·N_kv", fontsize=10)
    ax2.grid(True, which="both", alpha=0.3)
    save(fig, d, "flops_vs_heads")


def plot_hull(d):
    j = load(d, "hull.json")
    s = j["search"]
    keys = j["keys"]
    fig, axes = plt.subplots(2, 2, figsize=(10, 8.4))
    ax = axes[0][0]
    hull = [keys[0], keys[1], keys[3], keys[0]]
    ax.fill([h[0] for h in hull], [h[1] for h in hull], color="tab:blue", alpha=0.12, label="convex hull of the keys")
    for i, k in enumerate(keys):
        ax.plot(k[0], k[1], "o", color="tab:red" if i == 2 else "black")
        ax.annotate(f"k{i + 1} = ({k[0]}, {k[1]})", (k[0], k[1]), xytext=(6, 4), textcoords="offset points")
    ax.set_xlim(-1.5, 13.5)
    ax.set_ylim(-1.5, 12)
    ax.set_aspect("equal")
    ax.set_xlabel("key coordinate 1")
    ax.set_ylabel("key coordinate 2")
    ax.set_title("Seed 003's keys: k3 lies on the hull's edge k1–k2, not a vertex", fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    ax.grid(alpha=0.3)

    ax = axes[0][1]
    ax.plot(s["radii"], s["max_w3_by_r"], lw=3, alpha=0.5, label="search: max over 7200 directions")
    ax.plot(s["radii"], s["bound_by_r"], "k--", lw=1, label="bound 1/(3 + e^(−3√2·|q|))")
    ax.axhline(1 / 3, color="tab:red", lw=1, ls=":", label="supremum 1/3")
    ax.set_xscale("log")
    ax.set_xlabel("query magnitude |q| (inverse temperature)")
    ax.set_ylabel("largest attention weight on k3 (probability)")
    ax.set_title("One head: weight on k3 never reaches 1/3", fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)

    ax = axes[1][0]
    deg = [t * 180 / math.pi for t in s["thetas_rad"]]
    ax.plot(deg, s["w3_by_theta_at_r_max"], color="tab:red", label="weight on k3")
    colors = {0: "tab:blue", 1: "tab:orange", 2: "tab:red", 3: "tab:gray"}
    prev, start = None, 0
    for i, w in enumerate(s["winner_by_theta_at_r_max"] + [None]):
        if w != prev:
            if prev is not None:
                ax.axvspan(deg[start], deg[i - 1], color=colors[prev], alpha=0.12, lw=0)
                ax.text((deg[start] + deg[i - 1]) / 2, 0.36, f"k{prev + 1} first", ha="center", fontsize=8)
            prev, start = w, i
    ax.annotate("45°: k1, k2, k3 tie", xy=(45, max(s["w3_by_theta_at_r_max"])), xytext=(60, 0.3),
                fontsize=8, arrowprops=dict(arrowstyle="->", lw=0.8))
    ax.set_xlim(0, 360)
    ax.set_ylim(0, 0.4)
    ax.set_xticks(range(0, 361, 45))
    ax.set_xlabel("query direction (degrees)")
    ax.set_ylabel("attention weight on k3 (probability)")
    ax.set_title(f"One head at |q| = {s['r_max']:g}: k3 is never ranked first", fontsize=9)
    ax.grid(alpha=0.3)

    ax = axes[1][1]
    t = j["two_heads"]
    betas = t["betas"]
    w3 = [sel[2] for sel in t["selection"]]
    ax.plot(betas, w3, "o-", color="tab:green", label="two heads + min readout: softmax(β·min score)")
    ax.axhline(1 / 3, color="tab:red", lw=1, ls=":", label="one head's supremum 1/3")
    ax.set_xscale("log", base=2)
    ax.set_xticks(betas)
    ax.set_xticklabels([f"{b:g}" for b in betas])
    ax.minorticks_off()
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("readout sharpness β")
    ax.set_ylabel("weight on k3 (probability)")
    ax.set_title("Two heads q1=(1,0), q2=(0,1) and a fixed min readout select k3", fontsize=9)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.3)
    fig.suptitle("Seed 003's 'single perspective' argument, searched and bounded", y=1.0)
    fig.tight_layout()
    save(fig, d, "hull")


# the verdict keys attnbench claims writes (attn::claims::key) and their words; an unknown key is an error
VERDICT_WORDS = {"confirmed": "confirmed", "qualified": "holds with qualification", "refuted": "refuted"}


def ledger_md(cl):
    """claims.md: the criterion, one row per claim with what was measured, and the tally."""
    esc = lambda s: s.replace("|", "\\|")  # noqa: E731
    rows = []
    for c in cl["claims"]:
        verdict = f"**{VERDICT_WORDS[c['verdict']]}**" + (f": {esc(c['note'])}" if c["note"] else "")
        rows.append(f"| {c['id']} | {esc(c['claim'])} | {esc(c['source'])} | `{esc(c['command'])}` | "
                    f"{esc(c['measured'])} | {verdict} |\n")
    s = cl["summary"]
    return ("## The seed documents' quantitative claims\n\n" + cl["criterion"] + "\n\n"
            "| id | claim (paraphrased) | source | checked by | measured | verdict |\n|---|---|---|---|---|---|\n"
            + "".join(rows) + f"\n{s['total']} claims: {s['confirmed']} confirmed, {s['qualified']} hold with "
            f"qualification, {s['refuted']} refuted.\n")


def write_ledger(d):
    """Writes d/claims.md from d/claims.json, if the claims stage wrote one; returns its path or None."""
    path = os.path.join(d, "claims.json")
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return plotting.write_text(d, "claims.md", ledger_md(json.load(f)))


def main():
    d = sys.argv[1] if len(sys.argv) > 1 else "results/claims"
    write_ledger(d)
    plot_params(d)
    plot_flops_vs_n(d)
    plot_flops_vs_heads(d)
    plot_hull(d)


if __name__ == "__main__":
    main()
