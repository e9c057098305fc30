"""Fig. 3 as one PNG (matplotlib, Agg backend): every panel present in the rows."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .model import KINDS
from .panels import TITLES, XLABEL, Row

STYLE = {"CMS": ("0.45", "o", "--"), "CS": ("0.7", "s", "--"), "LazyCMS": ("C0", "o", "-"),
         "LazyCS": ("C1", "s", "-"), "PunctualCMS": ("C2", "^", ":"),
         "PunctualCS": ("C3", "v", ":")}


ARE_FLOOR = 1e-6  # an ARE of exactly 0 (exact non-private answers) is drawn at this value


def plot(rows: Sequence[Row], path: Path) -> None:
    """Write all panels present in ``rows`` into one PNG (matplotlib, Agg backend, log y)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in "abcdef" if any(r["panel"] == p for r in rows)]
    fig, axes = plt.subplots(1 + (len(panels) > 3), min(3, len(panels)), squeeze=False,
                             figsize=(5 * min(3, len(panels)), 4 * (1 + (len(panels) > 3))))
    for ax, p in zip(axes.flat, panels, strict=False):
        key = "rate" if p == "a" else "are"
        for kind in KINDS:
            pts = sorted((r["x"], max(r[key], ARE_FLOOR)) for r in rows
                         if r["panel"] == p and r["kind"] == kind)
            color, marker, ls = STYLE[kind]
            ax.plot(*zip(*pts, strict=True), color=color, marker=marker, ls=ls, label=kind)
        ax.set_yscale("log")
        if p == "a":
            ax.set_xscale("log", base=2)
        ylabel = "updates/CPU-s" if p == "a" else "ARE top-15"
        ax.set(title=TITLES[p], xlabel=XLABEL[p], ylabel=ylabel)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
