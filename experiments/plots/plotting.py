"""What every plot script here shares: atomic PNG + SVG output, log axes with plain labels,
Markdown tables and numbers as the report prints them."""
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def save(fig, d, stem, quiet=False):
    """Writes d/stem.png and d/stem.svg through temporaries renamed into place; returns the PNG path."""
    os.makedirs(d, exist_ok=True)
    for ext in ("png", "svg"):
        path = os.path.join(d, f"{stem}.{ext}")
        tmp = os.path.join(d, f".{stem}.tmp.{ext}")
        fig.savefig(tmp, dpi=150, bbox_inches="tight")
        os.replace(tmp, path)
        if not quiet:
            print("wrote", path)
    plt.close(fig)
    return os.path.join(d, f"{stem}.png")


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
