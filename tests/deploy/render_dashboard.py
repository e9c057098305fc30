"""Render the Grafana dashboard's panels from Prometheus query results with matplotlib.

Grafana itself cannot be installed here, so this draws what the committed
dashboard JSON asks for, at its grid positions: time series panels as lines
(legend from ``legendFormat``), stat panels as big numbers, bar gauges as
horizontal bars and tables as text. The data are real Prometheus answers
(``/api/v1/query_range`` for time series, ``/api/v1/query`` for instant panels).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

Result = list[dict[str, Any]]
"""A Prometheus API ``data.result`` list (matrix or vector)."""

_UNITS = {"s": "s", "ops": "/s", "Bps": "B/s", "bytes": "B", "short": "", "none": "",
          "percentunit": ""}


def legend(fmt: str, metric: Mapping[str, str]) -> str:
    """Grafana's ``{{label}}`` legend substitution."""
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: metric.get(m.group(1), ""), fmt).strip()


def _scale(unit: str, values: list[float]) -> tuple[float, str]:
    if unit != "bytes" or not values:
        return 1.0, _UNITS.get(unit, unit)
    top = max(abs(v) for v in values)
    for factor, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if top >= factor:
            return float(factor), name
    return 1.0, "B"


def render(dashboard: Mapping[str, Any], results: Mapping[tuple[int, str], Result],
           out: Path, subtitle: str = "") -> None:
    """Draw every non-row panel; ``results[(panel id, refId)]`` is that target's answer."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    rows = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in dashboard["panels"])
    fig = plt.figure(figsize=(18, rows * 0.42))
    fig.suptitle(f"{dashboard['title']} (rendered from Prometheus query results; "
                 f"Grafana cannot run here){subtitle}", fontsize=12, y=0.995)
    grid = fig.add_gridspec(rows, 24, hspace=0.0, wspace=0.0, top=0.97, bottom=0.01,
                            left=0.02, right=0.99)
    for p in panels:
        g = p["gridPos"]
        ax = fig.add_subplot(grid[g["y"] + 1:g["y"] + g["h"] - 1, g["x"] + 1:g["x"] + g["w"] - 1])
        ax.set_title(p["title"], fontsize=9, loc="left")
        unit = p.get("fieldConfig", {}).get("defaults", {}).get("unit", "")
        series = [(t, r) for t in p["targets"] for r in results.get((p["id"], t["refId"]), [])]
        if p["type"] == "timeseries":
            _timeseries(ax, series, unit)
        elif p["type"] == "bargauge":
            _bars(ax, series)
        elif p["type"] == "stat":
            _stat(ax, series)
        elif p["type"] == "table":
            _table(ax, p, results)
    fig.savefig(out, dpi=80, bbox_inches="tight")
    plt.close(fig)


def _timeseries(ax: Any, series: list[tuple[dict[str, Any], dict[str, Any]]], unit: str) -> None:
    values = [float(v) for _, r in series for _, v in r.get("values", [])
              if v not in ("NaN", "+Inf", "-Inf")]
    factor, label = _scale(unit, values)
    t0 = min((float(r["values"][0][0]) for _, r in series if r.get("values")), default=0.0)
    for target, r in series[:12]:
        xs = [float(t) - t0 for t, _ in r["values"]]
        ys = [float(v) / factor if v not in ("NaN", "+Inf", "-Inf") else float("nan")
              for _, v in r["values"]]
        ax.plot(xs, ys, linewidth=1, label=legend(target.get("legendFormat", ""), r["metric"]))
    ax.set_ylabel(label, fontsize=7)
    ax.set_xlabel("seconds", fontsize=7)
    ax.tick_params(labelsize=7)
    ax.grid(alpha=0.3)
    if series:
        ax.legend(fontsize=6, loc="upper left", ncol=2)


def _bars(ax: Any, series: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    names = [legend(t.get("legendFormat", ""), r["metric"]) for t, r in series]
    vals = [float(r["value"][1]) for _, r in series]
    ax.barh(names, vals, color="tab:green")
    ax.set_xlim(0, 1)
    ax.tick_params(labelsize=7)
    for i, v in enumerate(vals):
        ax.text(min(v, 0.85) + 0.01, i, f"{v:.1%}", va="center", fontsize=7)


def _stat(ax: Any, series: list[tuple[dict[str, Any], dict[str, Any]]]) -> None:
    ax.axis("off")
    for i, (t, r) in enumerate(series):
        ax.text(0.5, 0.7 - 0.45 * i, f"{float(r['value'][1]):g}", ha="center", fontsize=26,
                color="tab:green")
        ax.text(0.5, 0.52 - 0.45 * i, t.get("legendFormat", ""), ha="center", fontsize=8)


def _table(ax: Any, panel: Mapping[str, Any], results: Mapping[tuple[int, str], Result]) -> None:
    """Join the instant table targets on ``topology`` (Grafana's 'merge' transformation)."""
    ax.axis("off")
    rows: dict[str, dict[str, str]] = {}
    columns: list[str] = ["topology"]
    for t in panel["targets"]:
        for r in results.get((panel["id"], t["refId"]), []):
            row = rows.setdefault(r["metric"].get("topology", ""), {})
            if t["legendFormat"] in ("eps", "delta"):
                row[t["legendFormat"]] = f"{float(r['value'][1]):.3g}"
                if t["legendFormat"] not in columns:
                    columns.append(t["legendFormat"])
            else:
                for k, v in sorted(r["metric"].items()):
                    if k != "topology":
                        row[k] = v
                        if k not in columns:
                            columns.append(k)
    cells = [[name if c == "topology" else row.get(c, "") for c in columns]
             for name, row in sorted(rows.items())]
    if cells:
        table = ax.table(cellText=cells, colLabels=columns, loc="upper center", cellLoc="left")
        table.auto_set_font_size(False)
        table.set_fontsize(7)
        table.scale(1, 1.4)
