"""What every plot script here shares: atomic PNG + SVG output."""
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


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
