"""The words of the report's decoding section: the speed-up tables, the paragraph on weights
against cache, the byte ratio H/G, the overshoot where MHA's cache leaves the last-level cache,
and the bandwidth against the read ceiling (the triad beside it for reference) and the roofline.
Every figure quoted comes from the decode
rows of perf.json (decode.Decode); the only arithmetic here is the ratio of two medians (the
speed-up) and the thresholds the wording uses.
"""
import decode
from plotting import md_table


def fmt(v, d):
    return f"{v:,.{d}f}"


def span(a, b, d):
    """'a-b' with d decimals, or just 'a' when both print the same."""
    return fmt(a, d) if fmt(a, d) == fmt(b, d) else f"{fmt(a, d)}-{fmt(b, d)}"


def first(r, *keys):
    """The first of the keys the row has a value for (perf.json writes null where none)."""
    return next((r[k] for k in keys if r.get(k) is not None), None)


# The one rule for a share of a memory ceiling above 100 % (attn::share_mark): ‡ the cache is
# smaller than twice the last-level cache, so it is read from there in part or whole; † it is not,
# so the measurement is to distrust.
MARKS = {1: " ‡", 2: " †"}
MARK_NOTES = {1: "‡ read from the caches: the case's cache is smaller than the footprint from which a read-only "
                 "stream ran at DRAM speed on its threads (`attnbench peak`'s scan, dram_from_mib), so it is read from "
                 "the caches in part or whole and a share of a DRAM ceiling can exceed 100 % without saying anything "
                 "about DRAM.",
              2: "† a measurement to distrust: the cache is at least the footprint from which a read-only stream ran "
                 "at DRAM speed, so it streams from DRAM, and no kernel reads DRAM faster than the read probe does; a "
                 "share above 100 % says the probe or the case was measured at a noisy moment."}


def mark(r):
    return MARKS.get(int(r.get("share_mark") or 0), "")


def name(dec, g):
    return f"{'MHA' if g == dec.h else 'MQA' if g == 1 else 'GQA'} G={g}"


def speedup(dec, b, g, l):
    """MHA's median step time over the family's at (batch, L), or None."""
    m, q = dec.get(b, dec.h, l), dec.get(b, g, l)
    return m["time_ms"] / q["time_ms"] if m and q else None


def speedup_tables(dec):
    out = []
    for b in dec.batches:
        rows = []
        for l in dec.ls:
            m = dec.get(b, dec.h, l)
            if not m:
                continue
            cells = [f"{fmt(speedup(dec, b, g, l), 2)}×" if dec.get(b, g, l) else "–" for g in dec.gs]
            rows.append([l] + cells + [fmt(m["time_ms"] * 1e3, 0), fmt(m["us_per_token"], 0), fmt(m["cache_mib"], 0)])
        out.append(md_table([f"batch {b}: L"] + [name(dec, g) for g in dec.gs]
                            + ["MHA µs/step", "MHA µs/token", "MHA cache MiB"], rows))
    return "\n\n".join(out)


def case_table(dec):
    rows = []
    for b in dec.batches:
        for g in dec.gs:
            for l in dec.ls:
                r = dec.get(b, g, l)
                if not r:
                    continue
                along = first(r, "pct_read_alongside", "pct_triad_alongside")
                m = mark(r)
                rows.append([b, name(dec, g), l, fmt(r["cache_mib"], 1), fmt(r["time_ms"] * 1e3, 0),
                             fmt(r["us_per_token"], 0), fmt(r["core_us"], 0), fmt(r["kv_gbs"], 1),
                             fmt(first(r, "pct_read", "pct_triad"), 0) + m,
                             fmt(along, 0) + m if along is not None else "–",
                             fmt(first(r, "pct_roof_alongside", "pct_roof"), 0) + m, fmt(r["pct_triad"], 0),
                             fmt(r["gflops_matmul"], 1)])
    return md_table(["batch", "family", "L", "cache MiB", "µs/step", "µs/token", "core µs", "core GB/s",
                     f"% {dec.memory_name}", f"% {dec.memory_name} alongside", "% roof", "% triad (ref.)",
                     "step GFLOP/s"], rows)


def family_paragraph(dec):
    """Speed-up at the shortest and longest L, weights against cache, and where each family's
    speed-up peaks and ends against its byte ratio H/G."""
    h, gs, ls = dec.h, dec.gs, dec.ls
    b0, gmin, lmin, lmax = dec.batches[0], gs[0], ls[0], ls[-1]
    s = []
    lo_m, lo_q, hi_m, hi_q = dec.get(b0, h, lmin), dec.get(b0, gmin, lmin), dec.get(b0, h, lmax), dec.get(b0, gmin, lmax)
    if gmin < h and lo_m and lo_q and hi_m and hi_q:
        first_l = (f"At batch {b0}, {name(dec, gmin)} decodes a token {fmt(speedup(dec, b0, gmin, lmin), 2)}× as fast "
                   f"as MHA at L = {lmin} ({fmt(lo_q['time_ms'] * 1e3, 0)} vs {fmt(lo_m['time_ms'] * 1e3, 0)} µs per step)")
        if lmax == lmin:  # one context: one figure
            s.append(first_l + ".")
        else:
            s.append(first_l + f" and {fmt(speedup(dec, b0, gmin, lmax), 2)}× at L = {lmax} "
                     f"({fmt(hi_q['time_ms'] * 1e3, 0)} vs {fmt(hi_m['time_ms'] * 1e3, 0)} µs).")
    w = {g: next(r["weight_mib"] for r in dec.rows if r["kv_heads"] == g) for g in gs}
    s.append(f"A step reads the layer's weights once ({fmt(w[gs[0]], 1)} MiB at G = {gs[0]} to {fmt(w[gs[-1]], 1)} MiB "
             f"at G = {gs[-1]}: W_k and W_v grow with G) and the whole cache once, 2·B·G·d_head·(L+1)·4 bytes, G/H of "
             "MHA's. At short contexts the weights dominate and the families cost about the same; the speed-up grows "
             "with L towards the byte ratio H/G as the cache takes over.")
    listing, overshoot, below_w, below_k, below_c = [], [], [], [], []
    settles = True
    for g in gs:
        if g >= h:
            continue
        pts = [(l, speedup(dec, b0, g, l)) for l in ls if speedup(dec, b0, g, l)]
        if not pts:
            continue
        l_best, best = max(pts, key=lambda p: p[1])
        last = pts[-1][1]
        ratio = next(r["cache_ratio_to_mha"] for r in dec.rows if r["kv_heads"] == g)
        listing.append(f"{name(dec, g)}: " + (f"{fmt(last, 2)}× at L = {lmax} (its largest)" if l_best == lmax else
                                              f"up to {fmt(best, 2)}× (L = {l_best}), {fmt(last, 2)}× at L = {lmax}")
                       + f", byte ratio {fmt(ratio, 0)}")
        w = dec.wording
        if best > w["overshoot"] * ratio:
            overshoot.append(name(dec, g))
            settles = settles and last < w["settled"] * best
        q, m = dec.get(b0, g, lmax), dec.get(b0, h, lmax)
        if last < w["short_of_ratio"] * ratio and q:
            if q["cache_mib"] < w["weights_dominate"] * q["weight_mib"]:
                below_w.append(name(dec, g))
            elif q["arith_roof_gbs"] < dec.memory:  # the roofline's arithmetic side binds
                below_c.append(name(dec, g))
            elif m and q["kv_gbs"] < m["kv_gbs"]:
                below_k.append(f"{name(dec, g)} ({fmt(q['kv_gbs'], 1)} GB/s against MHA's {fmt(m['kv_gbs'], 1)})")
    if listing:
        s.append(f"At batch {b0}, per family: " + "; ".join(listing) + ".")
    mha = dec.get(b0, h, lmax) or dec.rows[0]
    if overshoot and dec.llc_mib:
        s.append(f"The ratio does not grow smoothly: MHA's cache leaves the {fmt(dec.llc_mib, 0)} MiB last-level cache at "
                 f"L ≈ {mha['llc_context']:.0f} (batch {b0}), while a G times smaller cache stays cached up to an H/G "
                 f"times longer context, so in between MHA streams from DRAM (the {dec.memory_name} measured "
                 f"{fmt(dec.memory, 1)} GB/s) while the smaller cache is read from the last-level cache: the speed-up "
                 f"overshoots the byte ratio ({', '.join(overshoot)})"
                 + (", then comes back towards it once both caches are in DRAM." if settles else "."))
    if below_w:
        s.append(f"It ends below the byte ratio for {', '.join(below_w)}: at the longest context measured the cache "
                 "is still smaller than twice the weights every step reads.")
    if below_k:
        s.append(f"It ends below the byte ratio for {', '.join(below_k)} at L = {lmax}: their roofline is the "
                 f"{dec.memory_name}, "
                 "as MHA's is, but the decode core reads their caches more slowly than MHA's (cache GB/s at that L "
                 "in brackets).")
    if below_c:
        s.append(f"It ends below the byte ratio for {', '.join(below_c)}: with H/G query heads per key/value head "
                 "every cache byte carries H/(2G) FLOPs, and at the measured FMA peak that arithmetic caps the read "
                 f"rate below the {dec.memory_name} (the roofline, below).")
    return " ".join(s)


def bandwidth_paragraph(dec, peak):
    """Caches at least twice the last-level cache: the core's read rate against the read ceiling
    (the run's and the one measured alongside; the triad for reference) and against the roofline;
    which families arithmetic caps, and what the streaming probe of `attnbench peak` reaches at
    their intensity."""
    parts, capped = [], []
    for g in dec.gs:
        rs = [r for r in dec.rows if r["kv_heads"] == g and r["cache_mib"] >= dec.dram_mib]
        if not rs:
            continue
        col = lambda *ks: [first(r, *ks) for r in rs if first(r, *ks) is not None]  # noqa: E731
        kv, pct = col("kv_gbs"), col("pct_read", "pct_triad")
        along, roof = col("pct_read_alongside", "pct_triad_alongside"), col("pct_roof_alongside", "pct_roof")
        triad = col("pct_triad")
        parts.append(f"{name(dec, g)} {span(min(kv), max(kv), 1)} GB/s, {span(min(pct), max(pct), 0)}% of the run's "
                     f"{dec.memory_name}" + (f" ({span(min(along), max(along), 0)}% of the one measured alongside)"
                                             if along else "")
                     + f", {span(min(roof), max(roof), 0)}% of its roofline"
                     + (f" ({span(min(triad), max(triad), 0)}% of the triad)" if dec.read and triad else ""))
        n = sum(1 for r in rs if first(r, "roof_alongside_gbs", "roof_gbs")
                < dec.wording["capped"] * first(r, "read_alongside_gbs", "read_ceiling_gbs", "triad_alongside_gbs", "triad_ceiling_gbs",
                              "peak_gbs"))
        if n:
            capped.append(f"{name(dec, g)} in {n} of its {len(rs)} cases ({rs[0]['intensity']:g} FLOP/B caps its read "
                          f"rate at {fmt(rs[0]['arith_roof_gbs'], 1)} GB/s)")
    if not parts:
        return ""
    where = (f"the {fmt(dec.dram_mib, 0)} MiB from which a read-only stream ran at DRAM speed on these threads "
             f"(`attnbench peak`'s scan; the last-level cache sysfs reports is {fmt(dec.llc_mib, 0)} MiB)"
             if dec.dram_mib != 2 * dec.llc_mib else f"twice the {fmt(dec.llc_mib, 0)} MiB last-level cache")
    s = (f"Bandwidth for caches of at least {where} (KV bytes over the "
         "attention core's time, every batch and L): " + "; ".join(parts) +
         f". The roofline is min({dec.memory_name}, FMA peak / I) with I = H/(2G) FLOPs per cache byte and the "
         f"measured {fmt(dec.rows[0]['peak_gflops'], 0)} GFLOP/s FMA peak.")
    probe = []
    stream = (peak or {}).get("peak", {}).get("stream_fma", [])
    for g in dec.gs:
        r = next(r for r in dec.rows if r["kv_heads"] == g)
        for p in stream:
            if abs(p["flop_per_byte"] - r["intensity"]) < 1e-9 and r["arith_roof_gbs"] < dec.memory:
                probe.append(f"{name(dec, g)}'s {p['flop_per_byte']:g} FLOP/B: {fmt(p['gbs']['median'], 1)} GB/s "
                             f"against a roof of {fmt(p['roof_gbs'], 1)}")
    if probe:
        s += (" Where the arithmetic side binds, a loop that only streams and does FMAs (`attnbench peak`, its stream "
              "rows) reaches (GB/s against the roofline): " + "; ".join(probe) + ".")
    if capped:
        s += (f" No kernel can read at 70% of the {dec.memory_name} for " + "; ".join(capped)
              + ": the step is bound by arithmetic there, not by memory, even at the FMA peak.")
    return s


def dtype_tables(dec):
    """The cache's type: per batch, family and type at the family's largest L with more than one
    type (decode.dtype_points), and MQA in fp32 against MHA in int8 (and bf16) at every (batch, L)
    both ran."""
    pts = decode.dtype_points(dec)
    if not pts:
        return ""
    out = [f"### The cache's type\n\nA decode case's precision is the type its key/value cache is stored in: f32, "
           "bf16 or f16 (rounded to nearest even when the token is appended), or int8 (symmetric, one fp32 scale per "
           "token and key/value head). Queries, weights, projections and every accumulation stay fp32 and the core "
           "widens the cache as it reads it, except where the CPU has narrower products: on AVX512-VNNI an int8 cache's "
           "scores, and P V at up to 16 query heads a key/value head, take integer products (queries and weights in "
           "16-bit fixed point); where AVX512_BF16's vdpbf16ps outruns the fp32 FMA (the metadata's bf16_path) a "
           "bf16 cache's scores at 2 to 16 query heads a key/value head take "
           "vdpbf16ps (queries rounded to bf16), and P V too where d_v is a multiple of 64 (weights rounded to bf16); "
           "both are charged in the check's bound. Each case is checked "
           "against fp64 on the same rounded or dequantized "
           "cache (err/bound ≤ 1 passes); *unrounded* is the core's error against fp64 on the cache before rounding, "
           "what the narrower type gives up (max |error| with the inputs in ±1, and as a multiple of the fp32 "
           "bound). Each batch and family at the largest L it ran in more than one type; speed-up: the family's f32 "
           "time per token over this type's.\n"]
    rows, marks = [], set()
    for (b, g) in sorted(pts):
        l = pts[(b, g)]
        base = dec.getp(b, g, l, "f32")
        for t in dec.dtypes:
            r = dec.getp(b, g, l, t)
            if not r:
                continue
            roof = first(r, "pct_roof_alongside", "pct_roof")
            m = mark(r)
            marks.add(int(r.get("share_mark") or 0))
            rows.append([b, name(dec, g), l, t, fmt(r["kv_bytes_per_cached_token"], 0), fmt(r["cache_mib"], 0),
                         fmt(r["us_per_token"], 0),
                         f"{fmt(base['us_per_token'] / r['us_per_token'], 2)}×" if base else "–",
                         fmt(r["kv_gbs"], 1),
                         fmt(first(r, "pct_read_alongside", "pct_read", "pct_triad_alongside", "pct_triad"), 0) + m,
                         fmt(roof, 0) + m if roof is not None else "–", f"{r['intensity']:.3g}",
                         f"{r['check_ratio']:.2g}" if r.get("check_ratio") is not None else "–",
                         f"{r['unrounded_max_abs']:.2g}" if r.get("unrounded_max_abs") is not None else "–",
                         f"{r['unrounded_ratio']:.3g}" if r.get("unrounded_ratio") is not None else "–"])
    out.append(md_table(["batch", "family", "L", "cache", "bytes / cached token", "cache MiB", "µs / token",
                         "speed-up vs f32", "core GB/s", f"% {dec.memory_name}", "% type's roof", "FLOP / cache byte",
                         "err/bound (same cache)", "unrounded max err", "unrounded err / fp32 bound"], rows) + "\n")
    for k in sorted(marks & set(MARK_NOTES)):
        out.append(MARK_NOTES[k] + "\n")
    gmin = dec.gs[0]
    if gmin < dec.h:
        rows = []
        for (bb, ll) in sorted({(r["batch"], r["context"]) for r in dec.all_rows}):
            q = dec.getp(bb, gmin, ll, "f32")
            for t in ("int8", "bf16"):
                m = dec.getp(bb, dec.h, ll, t)
                if q and m:
                    rows.append([bb, ll, t, fmt(q["us_per_token"], 0), fmt(m["us_per_token"], 0),
                                 f"{fmt(m['us_per_token'] / q['us_per_token'], 2)}×",
                                 fmt(q["kv_bytes_per_cached_token"], 0), fmt(m["kv_bytes_per_cached_token"], 0),
                                 f"{fmt(m['kv_bytes_per_cached_token'] / q['kv_bytes_per_cached_token'], 2)}×"])
        if rows:
            out.append(f"MQA in fp32 against MHA in a narrow cache (the comparison researchers ask about): time per "
                       f"generated token and cache bytes per cached token, and MHA's over MQA's (above 1×: MQA in "
                       f"fp32 is ahead). MQA here is {name(dec, gmin)}.\n")
            out.append(md_table(["batch", "L", "MHA cache", "MQA f32 µs/token", "MHA µs/token", "time MHA / MQA",
                                 "MQA f32 bytes/token", "MHA bytes/token", "bytes MHA / MQA"], rows) + "\n")
    return "\n".join(out)


def section(dec, peak, figure_lines):
    """The decoding section of report.md, under one heading."""
    md = ["## Incremental decoding: where MQA and GQA pay off\n"]
    if not dec.rows:
        return "\n".join(md + ["No decode case ran in this sweep" + (
            " (" + "; ".join(f"{r['id']}: {r.get('error', r['status'])}" for r in dec.failed) + ")" if dec.failed else "")
            + ".\n"])
    md.append(f"Measured by attnbench-bench's decode mode (variant `{dec.variant}`, {dec.threads} threads; d_model "
              f"{dec.d_model}, H {dec.h}, d_head {dec.dh}, fp32): per case the whole decode step (project the new token "
              "of every sequence, append it to the cache, attend over L+1 keys, project out) and the attention core "
              f"alone over the cache, medians of {dec.reps} repetitions. The G of one batch and L ran in one process, "
              "their repetitions interleaved at random with each other's and with a read probe and a triad measured "
              "alongside. "
              f"Speed-up of a step over MHA (G = {dec.h}): MHA's median step time divided by the family's.\n")
    md += figure_lines
    md.append(speedup_tables(dec) + "\n")
    md.append(family_paragraph(dec) + "\n")
    bw = bandwidth_paragraph(dec, peak)
    if bw:
        md.append(bw + "\n")
    if dec.read:
        md.append("Every decode case. Each % of a memory ceiling is of the read ceiling (the read-only stream "
                  "`attnbench peak` measures, which a step that reads its cache and writes almost nothing can at most "
                  "reach; the triad, whose 12 counted bytes per element include a write, is given for reference), and "
                  "% roof of min(that ceiling measured alongside, FMA peak / I):\n")
    else:  # a folder written before the read probe existed
        md.append("Every decode case. Each % of a memory ceiling is of the triad (this run measured no read-only "
                  "stream), and % roof of min(the triad measured alongside, FMA peak / I):\n")
    md.append(case_table(dec) + "\n")
    marks = {int(r.get("share_mark") or 0) for r in dec.rows}
    for k in sorted(marks & set(MARK_NOTES)):
        md.append(MARK_NOTES[k] + "\n")
    if dec.failed:
        md.append("Not timed: " + "; ".join(f"{r['id']} ({r.get('error', r['status'])})" for r in dec.failed) + ".\n")
    dt = dtype_tables(dec) if len(getattr(dec, "dtypes", [])) > 1 else ""
    if dt:
        md.append(dt)
    md.append("perf.csv's decode rows have every figure above and the rest (bytes, intensity, FLOP/s, the probes "
              "measured alongside).\n")
    return "\n".join(md)
