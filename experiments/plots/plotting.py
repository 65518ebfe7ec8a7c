"""What every plot script here shares: atomic PNG + SVG output, log axes with plain labels,
Markdown tables and numbers as the report prints them."""
import json
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def check_target(path):
    """The output-path rule (as attn.results' writer in C++): a target is a regular file or
    nothing yet; an existing link, FIFO, device or directory is refused with one line, never
    replaced or followed."""
    if os.path.lexists(path) and (os.path.islink(path) or not os.path.isfile(path)):
        sys.exit(f"{path}: refusing to write over something that is not a regular file")


def save(fig, d, stem, quiet=False):
    """Writes d/stem.png and d/stem.svg through temporaries renamed into place; returns the PNG path."""
    os.makedirs(d, exist_ok=True)
    for ext in ("png", "svg"):
        path = os.path.join(d, f"{stem}.{ext}")
        check_target(path)
        tmp = os.path.join(d, f".{stem}.tmp.{ext}")
        fig.savefig(tmp, dpi=150, bbox_inches="tight")
        os.replace(tmp, path)
        if not quiet:
            print("wrote", path)
    plt.close(fig)
    return os.path.join(d, f"{stem}.png")


def write_text(d, name, text):
    """Writes d/name through a temporary renamed into place (the Python side's one text writer)."""
    os.makedirs(d, exist_ok=True)
    check_target(os.path.join(d, name))
    tmp = os.path.join(d, f".{name}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    path = os.path.join(d, name)
    os.replace(tmp, path)
    return path


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


# perf.json's schema (written by the report's C++, attn.cases' case_fields): the case's fields, the
# shape's (every field but the provider and its threads), and the sweep's grids with the figures
# each is drawn as. A perf.json from before the schema gets the fields it had then.
LEGACY_SHAPE = ("mode", "precision", "d_model", "heads", "kv_heads", "d_head", "n_q", "n_kv", "context", "batch",
                "causal", "bias", "magnitude")


def shape_fields(perf):
    return tuple((perf or {}).get("schema", {}).get("shape_fields") or LEGACY_SHAPE)


def varying_fields(perf, rows, shown=()):
    """(name, label) of each field of the case (perf.json's schema, the C++ field table's rows) whose
    values differ between two of `rows`, but those in `shown`: the columns a table of these rows
    needs so that no two of them read as one case."""
    out = []
    for f in (perf or {}).get("schema", {}).get("fields") or []:
        name = f["name"]
        if name in shown:
            continue
        values = {json.dumps(r.get(name, f.get("default")), sort_keys=True) for r in rows}
        if len(values) > 1:
            out.append((name, f.get("label") or name))
    return out


def field_text(r, name):
    """A field's value as a table shows it: yes/no for a flag, '–' for none."""
    v = r.get(name)
    if isinstance(v, bool):
        return "yes" if v else "no"
    return "–" if v is None else str(v)


def grids_drawn_as(perf, figure):
    """Names of the sweep's grids that are drawn as `figure` (vs_n, vs_heads, threads, decode)."""
    grids = (perf or {}).get("schema", {}).get("grids")
    if grids is None:  # a perf.json from before figures were declared: every grid, every figure
        return {g for r in (perf or {}).get("cases", []) for g in r.get("grids", [])}
    return {g["name"] for g in grids if figure in g["figures"]}


def rows_of(perf, figure):
    """The rows of the grids drawn as `figure` (a case asked for by several grids is in each)."""
    names = grids_drawn_as(perf, figure)
    return [r for r in (perf or {}).get("cases", []) if names & set(r.get("grids", []))]


def config_key(r, keys):
    return tuple((k, r.get(k)) for k in keys)


def config_text(cfg):
    """One line naming a panel's fixed sizes: 'core, d_model=512, H=8, batch 1, causal'."""
    c = dict(cfg)
    s = str(c.get("mode", "?"))
    if c.get("family") and c.get("family") not in ("mha", "gqa", "mqa", "single-head", "wide"):
        s += f", {c['family']}" + (f" {c['form']}" if c.get("form") not in (None, "none") else "")
    for k, label in (("d_model", "d_model"), ("heads", "H")):
        if k in c:
            s += f", {label}={c[k]}"
    if "kv_heads" in c and c["kv_heads"] != c.get("heads"):
        s += f", G={c['kv_heads']}"
    if "n_q" in c:
        s += f", N={c['n_q']}"
    if "batch" in c:
        s += f", batch {c['batch']}"
    if c.get("causal"):
        s += ", causal"
    if c.get("mode") == "decode" and "context" in c:
        s += f", context {c['context']}"
    if c.get("device") not in (None, "cpu"):
        s += f", {c['device']}"
    return s
