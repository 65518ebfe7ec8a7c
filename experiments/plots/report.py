#!/usr/bin/env python3
"""Plots and report.md of one `attnbench report` run, from the files it stored.

    python3 experiments/plots/report.py results/<run-id>

(`attnbench plot results/<run-id>` runs this after re-aggregating cases/ into perf.json.)
Nothing is measured or computed here beyond medians' ratios: the numbers come from the run's
JSON. Figures go to results/<run-id>/figures/ as PNG and SVG; report.md embeds the PNGs.
"""
import json
import os
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import plotting  # noqa: E402
import claims  # noqa: E402  (the params / FLOPs / hull plots)
import decode as decode_plots  # noqa: E402  (the decode figures)
import decode_text  # noqa: E402  (the decode section's tables and prose)
import device_decode as device_decode_section  # noqa: E402  (a device's decode cores: GB/s against its read ceiling)
import peers as peers_section  # noqa: E402  (versus peers, the threads sweep)
import perf as perf_section  # noqa: E402  (the performance figures and tables)
import merged  # noqa: E402  (what a merge of shards says about itself)
import latent as latent_section  # noqa: E402  (MLA beside the families of its shape)
import local as local_section  # noqa: E402  (sliding windows beside the full causal mask)
from plotting import md_table  # noqa: E402


def load(d, name):
    path = os.path.join(d, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def save(fig, figdir, stem):
    plotting.save(fig, figdir, stem, quiet=True)
    return f"figures/{stem}.png"


def figures_md(figs, prefix=""):
    """Markdown image lines for the figures (stem -> path) whose stem starts with prefix."""
    return [f"![{stem}]({path})\n" for stem, path in figs.items() if stem.startswith(prefix)]


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


def claims_section(cl):
    if not cl:
        return "Not run in this sweep.\n"
    s = cl["summary"]
    out = (f"{s['total']} quantitative claims of the seed documents, each checked by a command: "
           f"{s['confirmed']} confirmed, {s['qualified']} hold with qualification, {s['refuted']} refuted. "
           "The full ledger, with what was measured and why, is [claims.md](claims.md).\n\n")
    # the verdict keys attnbench claims writes (attn::claims::key); an unknown one is an error
    verdict = dict(claims.VERDICT_WORDS, refuted="**refuted**")
    rows = [[c["id"], c["claim"], c["source"], f"`{c['command']}`", verdict[c["verdict"]]]
            for c in cl["claims"]]
    return out + md_table(["id", "claim (paraphrased)", "source", "checked by", "verdict"], rows) + "\n"


FIGURE_WORDS = {"vs_n": "time, GFLOP/s and % of peak against N", "vs_heads": "time against H (the free lunch)",
                "threads": "the threads sweep", "decode": "the decoding section's figures",
                "latent": "the latent-attention section", "local": "the local-attention section",
                "table": "the medians table alone"}


def figures_by_grid(perf, drawn, skipped_n, skipped_h):
    """One line per grid of the sweep: the figures it is drawn as (named in the sweep, or what
    its axes call for), or why a figure it asked for is not there."""
    grids = (perf or {}).get("schema", {}).get("grids") or []
    if not grids:
        return ""
    lines = []
    axis = {"vs_n": ("n_q", "N"), "vs_heads": ("heads", "H"), "threads": ("threads", "thread count")}
    for g in grids:
        cases = [r for r in perf["cases"] if g["name"] in r.get("grids", [])]
        ran = bool(cases)
        parts = []
        for f in g["figures"]:
            why = {"vs_n": skipped_n, "vs_heads": skipped_h}.get(f, {}).get(g["name"])
            values = {r.get(axis[f][0]) for r in cases} if f in axis else set()
            if f == "table":
                parts.append("the medians table alone (it varies no axis a figure draws)")
            elif why:
                parts.append(f"not drawn as {FIGURE_WORDS[f]}: {why}")
            elif ran and f in axis and len(values) < 2:
                parts.append(f"not drawn as {FIGURE_WORDS[f]}: its cases ran at one {axis[f][1]}"
                             + (" (its variants are not threaded)" if f == "threads" else ""))
            elif not ran or not drawn.get(f):
                parts.append(f"not drawn as {FIGURE_WORDS[f]}: none of its cases ran ok")
            else:
                parts.append(FIGURE_WORDS[f])
        lines.append(f"- `{g['name']}`" + (" (figures named in the sweep)" if g.get("declared") else "") + ": "
                     + "; ".join(parts))
    return "What each grid of the sweep is drawn as:\n\n" + "\n".join(lines) + "\n"


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
        perf_section.assign_styles(r["variant"] for r in perf["cases"])
        perf_section.PEERS.update(r["variant"] for r in perf["cases"] if peers_section.is_peer(r))
    perf_figs, skipped_n = perf_section.plot_vs_n(d, figdir, perf, peak) if perf else ([], [])
    lunch_path, lunch_configs, lunch_series, skipped_h = (perf_section.plot_free_lunch(d, figdir, perf) if perf
                                                          else (None, [], {}, []))

    md = [f"# attnbench report: {run.get('run_id', os.path.basename(os.path.abspath(d)))}\n"]
    md.append(f"Sweep **{run.get('preset', '?')}** ({run.get('sweep_source', '?')}), started "
              f"{run.get('started_utc', '?')} on {meta.get('cpu_model', '?')} ({meta.get('logical_cores', '?')} logical "
              f"CPUs), commit {meta.get('commit', '?')}. fp32 unless noted; times are medians over "
              "Google Benchmark repetitions.\n")
    md += merged.note(d)
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
        read = (f"read-only stream {p['read_gbs_1_thread']['median']:.1f} / {p['read_gbs_all_threads']['median']:.1f} "
                "GB/s (a decode step's memory ceiling); " if "read_gbs_1_thread" in p else "")
        md.append(f"Measured ceilings (`attnbench peak`, medians, 1 / {p['threads']} threads): fp32 FMA "
                  f"{p['fma_f32_gflops_1_thread']['median']:.1f} / {p['fma_f32_gflops_all_threads']['median']:.1f} "
                  f"GFLOP/s; {read}triad {p['triad_gbs_1_thread']['median']:.1f} / "
                  f"{p['triad_gbs_all_threads']['median']:.1f} GB/s. Every % of peak below refers to the FMA figure at "
                  "the case's thread count; every % of a memory ceiling in the decoding section to the "
                  + ("read-only stream's" if read else "triad's") + ".\n")
        devices = sorted({c.get("device", "cpu") for c in (perf or {}).get("cases", [])} - {"cpu"})
        if devices:
            md.append(f"Cases on {', '.join(devices)} are held to that device's own ceilings, measured in each harness "
                      "process (the metadata's `attnbench_peak_<device>_*`): % of peak against its 16-bit matrix "
                      "rate (cuBLAS's bf16 GEMM; f32 cases on a device carry none), % of read and the roofline against "
                      "its read-only bandwidth; they are timed by the device's clock with its cache flushed before "
                      "each call.\n")
        bf16_ceilings = [(name, p[key + "_1_thread"]["median"], p[key + "_all_threads"]["median"])
                         for name, key in (("bf16 dot products (vdpbf16ps)", "bf16_dot_gflops"),
                                           ("AMX bf16 tiles (tdpbf16ps)", "amx_bf16_gflops"))
                         if key + "_1_thread" in p]
        if bf16_ceilings:
            ran = "; ".join(f"{name} {one:.1f} GFLOP/s on 1 thread and {every:.1f} on {p['threads']}"
                            for name, one, every in bf16_ceilings)
            md.append(f"This CPU has bf16 products: {ran} (fp32 FMA: above). A bf16 core or layer case's % of peak "
                      f"is against the last of these (the metadata's `bf16_path` says what the bf16 core ran on).\n")
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
        threads_png, threads_table = peers_section.threads_figure(figdir, perf, save)
        dec = decode_plots.Decode(perf, meta)
        md.append(figures_by_grid(perf, {"vs_n": bool(perf_figs), "vs_heads": bool(lunch_path),
                                         "threads": bool(threads_png),
                                         "decode": bool(dec.rows) or bool(device_decode_section.rows_of(perf)[0]),
                                         "latent": any(r["status"] == "ok" for r in plotting.rows_of(perf, "latent")),
                                         "local": any(r["status"] == "ok" for r in plotting.rows_of(perf, "local"))},
                                  dict(skipped_n), dict(skipped_h)))
        for stem, path, cfgs in perf_figs:
            md.append(f"![{stem}]({path})\n")
        if lunch_path:
            path, configs, series = lunch_path, lunch_configs, lunch_series
            md.append("### The free lunch\n")
            md.append("Splitting d_model into more, narrower heads keeps the parameters (4·d_model²) and the matmul "
                      "FLOPs constant; the time is another matter: each head's matmuls get thinner (d_head shrinks), so "
                      "arithmetic intensity per head drops, and the softmax work grows with H·N².\n")
            md.append(f"![free_lunch]({path})\n")
            md.append(perf_section.free_lunch_table(configs, series) + "\n")
        if threads_png:
            md.append("### Threads sweep\n")
            md.append("Each shape run at several thread counts: the speed-up over its own 1-thread time and the "
                      "parallel efficiency (speed-up / threads).\n")
            md.append(f"![threads_efficiency]({threads_png})\n")
            md.append(threads_table + "\n")
        if any(r["mode"] != "decode" for r in perf["cases"]):
            md.append("### Medians, every case\n")
            if any(r["mode"] == "decode" for r in perf["cases"]):
                md.append("Decode cases are in their own section below.\n")
            md.append(perf_section.perf_table(perf, peak) + "\n")
    else:
        md.append("Not run in this sweep.\n")

    md.append(peers_section.section(d, perf))

    dec = decode_plots.Decode(perf, meta) if perf else None
    if dec and (dec.rows or dec.failed):
        decode_figs = {}

        def save_decode(fig, _d, stem):
            decode_figs[stem] = save(fig, figdir, stem)

        decode_plots.save = save_decode
        if dec.rows:
            decode_plots.plot_all(dec, figdir)
        md.append(decode_text.section(dec, peak, figures_md(decode_figs)))

    device_decode_section.save = lambda fig, _d, stem: save(fig, figdir, stem)
    md.append(device_decode_section.section(perf, figdir))

    latent_section.save = lambda fig, _d, stem: save(fig, figdir, stem)
    md.append(latent_section.section(d, perf, check, figdir))

    local_section.save = lambda fig, _d, stem: save(fig, figdir, stem)
    md.append(local_section.section(d, perf, figdir))

    md.append("## Parameters\n")
    md += figures_md(claim_figs, "params")
    md.append(params_section(params))
    md.append("## FLOPs\n")
    md += figures_md(claim_figs, "flops")
    md.append(flops_section(flops))
    md.append("## Claims ledger\n")
    md += figures_md(claim_figs, "hull")
    md.append(claims_section(cl))
    if cl:
        claims.write_ledger(d)
    md.append("## Machine and build\n")
    md.append(md_table(["key", "value"], [[k, f"`{v}`" if k in ("flags", "cpu_simd_flags") else v]
                                         for k, v in meta.items()]) + "\n")
    md.append("Files of this run (JSON and CSV per stage, one JSON per performance case under cases/) are "
              "described in results/README.md.\n")
    plotting.write_text(d, "report.md", "\n".join(md))


if __name__ == "__main__":
    main()
