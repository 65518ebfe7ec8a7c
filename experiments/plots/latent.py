#!/usr/bin/env python3
"""The report's section "Beyond GQA: latent attention" (MLA, DeepSeek-V2).

Reads what the C++ wrote -- latent/params.json (attnbench params --family mla: weights, cache per
token per family and form, FLOPs), the perf rows of the grids drawn as "latent" (MLA's two forms
and the families at its shape, decode and layer), and check.json's MLA rows -- and draws one
figure and the section's tables. Every figure shown is read from those files; this file computes
nothing but ratios of medians (absorbed over naive).

    python3 experiments/plots/latent.py results/<run-id>     # the figure alone
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plotting  # noqa: E402
from decode import family as decode_family  # noqa: E402  (MHA, GQA or MQA from G and H)
from decode_text import MARK_NOTES  # noqa: E402  (the one share rule: ‡ read from the caches, † to distrust)
from plotting import md_table, num  # noqa: E402

save = plotting.save  # report.py points this at its own writer

FORM_WORDS = {"absorb": "absorbed", "naive": "naive"}
MARKS = {1: "‡", 2: "†"}


def roof_share(r):
    """% of the roofline (read measured alongside) with the case's share mark, as the decode section."""
    roof = r.get("pct_roof_alongside") if r.get("pct_roof_alongside") is not None else r.get("pct_roof")
    return num(roof, 3) + MARKS.get(int(r.get("share_mark") or 0), "")


def member(r):
    """What a row is in this section: ('MLA absorbed', order) or ('GQA G=4', order)."""
    if r.get("family") == "mla":
        form = r.get("form", "none")
        return f"MLA {FORM_WORDS.get(form, form)}", (0 if form == "absorb" else 1)
    g, h = r["kv_heads"], r["heads"]
    name = decode_family(g, h)
    return (f"{name} G={g}" if name == "GQA" else name), 2 + (h // g if g else 0)


STYLE = {"MLA absorbed": dict(color="tab:red", marker="*", ms=9), "MLA naive": dict(color="tab:red", marker="o",
                                                                                    ls="--", mfc="none"),
         "MHA": dict(color="tab:blue", marker="o"), "MQA": dict(color="tab:orange", marker="v")}
GQA_COLORS = ["tab:green", "tab:purple", "tab:brown", "tab:olive"]


def style(name, gqa_names):
    if name in STYLE:
        return STYLE[name]
    return dict(color=GQA_COLORS[gqa_names.index(name) % len(GQA_COLORS)], marker="^")


def table1(lp):
    """DeepSeek-V2's Table 1 at each named configuration, as attnbench params computed it."""
    rows = []
    for c in lp["rows"]:
        for x in c["cache"]:
            b = x["bytes_per_token"]
            rows.append([c["configuration"], x["what"], f"{x['elements_per_token']:,}", f"{b['f32']:,}",
                         f"{b['bf16']:,}", f"{b['int8']:,}", num(x["vs_mha"], 4), num(x["gqa_groups_equivalent"], 4),
                         num(x["decode_intensity_flop_per_byte"]["f32"], 3)])
    return md_table(["configuration", "family / form", "cached elements per token per layer", "f32 [B]",
                     "bf16/f16 [B]", "int8 [B]", "vs MHA", "as GQA groups of d_h", "decode FLOP per f32 byte"], rows)


def params_table(lp):
    rows = [[c["configuration"], c["d_model"], c["heads"], c["q_lora_rank"], c["kv_lora_rank"],
             f"{c['qk_nope_head_dim']} + {c['qk_rope_head_dim']}", c["v_head_dim"],
             f"{c['closed_form']['matrices']:,}", f"{c['closed_form']['norms']:,}", f"{c['allocated']:,}",
             num(c["vs_4_d_model_squared"], 4)] for c in lp["rows"]]
    return md_table(["configuration", "d_model", "heads", "d_c'", "d_c", "d_head (nope + rope)", "d_v",
                     "matrices [params]", "norm vectors [params]", "allocated [params]",
                     "matrices / 4 d_model^2"], rows)


def decode_rows(perf):
    # ours: a peer's rows (its attention over the cache alone) are the versus-peers section's
    rows = [r for r in plotting.rows_of(perf, "latent") if r["mode"] == "decode" and not r.get("peer")]
    if not any(r.get("family") == "mla" for r in rows):  # a folder from before MLA: every grid, no MLA
        return [], []
    return [r for r in rows if r["status"] == "ok" and r.get("core_time_ms")], \
        [r for r in rows if r["status"] != "ok"]


def panels(rows):
    """(d_model, heads, batch, threads, variant) -> rows: one comparison per panel."""
    out = {}
    for r in rows:
        out.setdefault((r["d_model"], r["heads"], r["batch"], r["threads"], r["variant"]), []).append(r)
    return out


def decode_table(rows):
    rows = sorted(rows, key=lambda r: (r.get("precision", "f32") != "f32", r.get("precision", "f32"), r["context"],
                                       member(r)[1]))
    out = []
    for r in rows:
        out.append([member(r)[0], r.get("precision", "f32"), r["context"], f"{r['kv_bytes_per_cached_token']:,.0f}",
                    num(r["cache_mib"], 4), num(r["core_time_ms"], 4), num(r["time_ms"], 4),
                    num(r.get("gflops_core"), 3), num(r.get("intensity"), 3), roof_share(r),
                    num(r.get("check_ratio"), 2)])
    return md_table(["family / form", "cache type", "L [tokens]", "cache per token [B]", "cache [MiB]",
                     "attention core [ms]", "whole step [ms]", "core [GFLOP/s]", "core FLOP per cache byte",
                     "% of roofline (read alongside)", "error / bound"], out)


def ratio_table(rows):
    """Absorbed over naive, per cache type and L: the per-token speed ratio of the attention core."""
    by = {(r.get("precision", "f32"), r["context"], r.get("form")): r for r in rows if r.get("family") == "mla"}
    out = []
    for (t, ctx, form), a in sorted(by.items()):
        n = by.get((t, ctx, "naive"))
        if form != "absorb" or not n:
            continue
        out.append([t, ctx, num(n["core_time_ms"], 4), num(a["core_time_ms"], 4),
                    num(n["core_time_ms"] / a["core_time_ms"], 3),
                    num(n["kv_bytes_per_cached_token"] / a["kv_bytes_per_cached_token"], 3),
                    roof_share(a), roof_share(n)])
    if not out:
        return ""
    return md_table(["cache type", "L [tokens]", "naive core [ms]", "absorbed core [ms]",
                     "absorbed speed-up [x]", "naive / absorbed cache bytes [x]", "absorbed % of roofline",
                     "naive % of roofline"], out)


def plot(rows, key, figdir, stem):
    t = [r for r in rows if r.get("precision", "f32") == "f32"]
    if not t:
        return None
    names = sorted({member(r) for r in t}, key=lambda m: m[1])
    gqa_names = [n for n, _ in names if n.startswith("GQA")]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 4.6))
    for name, _ in names:
        pts = sorted((r["context"], r["core_time_ms"], r["cache_mib"]) for r in t if member(r)[0] == name)
        st = style(name, gqa_names)
        a1.plot([p[0] for p in pts], [p[1] for p in pts], label=name, **st)
        a2.plot([p[0] for p in pts], [p[2] for p in pts], label=name, **st)
    ls = sorted({r["context"] for r in t})
    for ax in (a1, a2):
        plotting.pow2_axis(ax, ls, "cached tokens L (context length)")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
    a1.set_ylabel("attention core per decode step (ms, log scale)")
    a2.set_ylabel("KV cache per layer (MiB, log scale)")
    a1.set_title("time per step: bytes streamed against FLOPs done", fontsize=9)
    a2.set_title("cache per layer: MLA's forms beside the families of its heads", fontsize=9)
    a1.legend(fontsize=8)
    d_model, heads, batch, threads, variant = key
    fig.suptitle(f"Decode beside MLA: d_model {d_model}, {heads} query heads, batch {batch}, f32 cache, "
                 f"variant '{variant}', {threads} threads (median of the repetitions)", fontsize=10)
    fig.tight_layout()
    return save(fig, figdir, stem)


def layer_table(perf):
    rows = [r for r in plotting.rows_of(perf, "latent")
            if r["mode"] == "layer" and r["status"] == "ok" and r.get("family") == "mla"]
    out = [[member(r)[0], r["variant"], r["n_q"], "yes" if r["causal"] else "no", r.get("precision", "f32"),
            r["threads"], num(r["time_ms"], 4), num(r.get("gflops_matmul"), 4), num(r.get("pct_peak"), 3)]
           for r in sorted(rows, key=lambda r: (member(r)[1], r["variant"], r["causal"]))]
    if not out:
        return ""
    return md_table(["form", "variant", "N [tokens]", "causal", "storage", "threads", "time [ms]",
                     "matmul GFLOP/s", "% of FMA peak"], out)


def errors_table(check):
    rows = [c for c in (check or {}).get("cases", []) if c.get("family") == "mla"]
    by = {}
    for c in rows:
        k = (c.get("form", "?"), c["mode"], c["precision"])
        by.setdefault(k, []).append(c)
    out = []
    for (form, mode, prec), cs in sorted(by.items()):
        out.append([FORM_WORDS.get(form, form), mode, prec, len(cs), sum(1 for c in cs if c["pass"]),
                    num(max(c["max_abs_error"] for c in cs), 3), num(max(c["error_over_bound"] for c in cs), 3)])
    if not out:
        return ""
    return md_table(["form", "mode", "precision (decode: cache type)", "checks", "passed",
                     "largest max |out - fp64|", "largest error / bound"], out)


def section(d, perf, check, figdir):
    """The section's markdown; empty when the run has neither MLA's counts nor its cases."""
    path = os.path.join(d, "latent", "params.json")
    lp = None
    if os.path.exists(path):
        with open(path) as f:
            lp = json.load(f)
    ok, failed = decode_rows(perf) if perf else ([], [])
    layer = layer_table(perf) if perf else ""
    errors = errors_table(check)
    if not (lp or ok or layer or errors):
        return ""
    md = ["## Beyond GQA: latent attention\n",
          "Multi-head Latent Attention (DeepSeek-V2, arXiv 2405.04434) caches a latent c = W^DKV x of d_c elements "
          "and one rotary key of d_h^R shared by every head; keys and values are decompressed per head (the "
          "**naive** form, which caches them), or the up-projections are folded into the query and the output "
          "(the **absorbed** form: MQA over a (d_c + d_h^R)-wide key and a d_c-wide value). Both forms are one "
          "function; each is checked against the fp64 reference of the naive form.\n"]
    if lp:
        md.append("### DeepSeek-V2's Table 1, recomputed\n")
        md.append("Cache per token per layer, per family at each configuration's heads and d_h (the claims ledger "
                  "checks the Table's formulas, 9/2 d_h and '2.25 groups'):\n\n" + table1(lp) + "\n")
        md.append("### Parameters per configuration\n")
        md.append("MLA keeps neither d_head = d_model / H nor 4 d_model^2: the closed form per weight, against what "
                  "the weights allocate (all agree: " + ("yes" if lp.get("all_agree") else "**NO**") + ").\n\n"
                  + params_table(lp) + "\n")
    if ok:
        md.append("### Decode per family and form\n")
        ps = sorted(panels(ok).items())
        for key, rows in ps:
            d_model, heads, batch, threads, variant = key
            stem = f"latent_decode_d{d_model}_h{heads}_b{batch}"
            if sum(1 for k, _ in ps if k[:3] == key[:3]) > 1:  # one figure per panel
                stem += f"_t{threads}_{variant}"
            png = plot(rows, key, figdir, stem)
            if png:
                md.append(f"![latent_decode]({png})\n")
            ratios = ratio_table(rows)
            if ratios:
                md.append("The attention core alone over the cache, absorbed against naive (per-token speed; the "
                          "roofline is min(read bandwidth x intensity, FMA peak), the read bandwidth measured "
                          "alongside):\n\n" + ratios + "\n")
            md.append(decode_table(rows) + "\n")
            for k in sorted({int(r.get("share_mark") or 0) for r in rows} & set(MARK_NOTES)):
                md.append(MARK_NOTES[k] + "\n")
    if failed:
        md.append("Cases that did not run: " + "; ".join(f"`{r['id']}` ({r.get('error', r['status'])})"
                                                          for r in failed) + "\n")
    if layer:
        md.append("### The layer (prefill) in both forms\n\n" + layer + "\n")
    if errors:
        md.append("### Error against fp64, per form and precision (attnbench check)\n\n" + errors + "\n")
    return "\n".join(md)


def main(d):
    with open(os.path.join(d, "perf.json")) as f:
        perf = json.load(f)
    check = None
    if os.path.exists(os.path.join(d, "check.json")):
        with open(os.path.join(d, "check.json")) as f:
            check = json.load(f)
    print(section(d, perf, check, os.path.join(d, "figures")))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
