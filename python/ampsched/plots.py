"""The reports' figures from DataFrames, drawn by the same renderer as ``ampsched reproduce``.

Every helper takes DataFrames as returned by `simulate` (`SimResult.series`)
or `sweep` and returns a `Chart`: the chart as data (``chart.spec``, the JSON
the Rust renderer reads) and its SVG (``chart.svg``, drawn by the
``ampsched-charts`` crate with plotters, the one plotting path of the project).
A notebook shows a `Chart` inline; ``chart.save("fig.svg")`` writes the file.
Readability is the reports': colour-blind-safe colours, one marker shape per
series, outlined markers drawn over lines and dodged in scatters, and a
``chart.reading`` sentence saying how to read the figure.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from ._ampsched import chart_reading as _chart_reading
from ._ampsched import chart_svg as _chart_svg

__all__ = [
    "Chart",
    "completion_stacked",
    "speedup_bars",
    "normalized_vs_param",
    "time_series",
    "cdf",
    "points_vs_power",
]


class Chart:
    """A figure: ``spec`` (plain data) and its SVG, drawn by the reports' renderer."""

    def __init__(self, spec: dict[str, Any]):
        self.spec = spec
        self._svg: str | None = None

    @property
    def svg(self) -> str:
        """The standalone SVG document (deterministic: the same spec gives the same bytes)."""
        if self._svg is None:
            self._svg = _chart_svg(json.dumps(self.spec))
        return self._svg

    @property
    def reading(self) -> str:
        """One sentence for a caption: how to read the chart."""
        return _chart_reading(json.dumps(self.spec))

    def save(self, path: str | Path) -> Path:
        """Write the SVG to ``path``; returns the path."""
        p = Path(path)
        p.write_text(self.svg, encoding="utf-8")
        return p

    def _repr_svg_(self) -> str:  # Jupyter shows the figure inline
        return self.svg

    def __repr__(self) -> str:
        return f"Chart({self.spec.get('kind')!r}, title={self.spec.get('title')!r})"


def _num(v) -> float:
    """A float for the spec; NaN (a missing value) becomes 0, as the reports draw it."""
    f = float(v)
    return 0.0 if math.isnan(f) else f


def completion_stacked(df: pd.DataFrame, by: str = "placer", metric: str = "completion_s") -> Chart:
    """Stacked bars, one per value of ``by``: each domain's mean ``metric`` over seeds, whiskers ± stdev."""
    g = df.groupby([by, "domain"], sort=False)[metric]
    mean, std = g.mean().unstack("domain"), g.std().fillna(0.0).unstack("domain")
    series = []
    for dom in mean.columns:
        m = [_num(v) for v in mean[dom].to_numpy()]
        s = [_num(v) for v in std[dom].to_numpy()]
        series.append({"name": str(dom), "values": m, "err": [[a - b, a + b] for a, b in zip(m, s)]})
    return Chart(
        {
            "kind": "bar",
            "title": f"{metric} per domain, stacked",
            "categories": [str(i) for i in mean.index],
            "series": series,
            "stacked": True,
            "y_label": f"{metric} (stacked per domain, ± stdev)",
        }
    )


def speedup_bars(df: pd.DataFrame, baseline: str, by: str = "placer", metric: str = "completion_s") -> Chart:
    """Grouped bars: per domain, speedup of each ``by`` value over ``baseline`` (mean ``metric`` ratio)."""
    mean = df.groupby(["domain", by], sort=False)[metric].mean().unstack(by)
    if baseline not in mean.columns:
        raise ValueError(f"baseline {baseline!r} is not a value of {by!r}: {list(mean.columns)}")
    others = [c for c in mean.columns if c != baseline]
    series = [{"name": str(c), "values": [_num(v) for v in (mean[baseline] / mean[c]).to_numpy()]} for c in others]
    return Chart(
        {
            "kind": "bar",
            "title": f"speedup over {baseline}",
            "categories": [str(d) for d in mean.index],
            "series": series,
            "y_label": f"speedup over {baseline} (×)",
            "reference": 1.0,
        }
    )


def normalized_vs_param(df: pd.DataFrame, param: str, metric: str = "completion_s", by: str = "domain") -> Chart:
    """Lines, one per ``by`` value: mean ``metric`` against ``param`` (e.g. a timeslice), normalised to the first."""
    mean = df.groupby([by, param])[metric].mean().unstack(param)
    series = []
    for key, row in mean.iterrows():
        norm = (row / row.iloc[0]).to_numpy()
        series.append({"name": str(key), "points": [[_num(x), _num(y)] for x, y in zip(row.index, norm)]})
    return Chart(
        {
            "kind": "line",
            "title": f"normalised {metric} against {param}",
            "series": series,
            "style": "lines",
            "x_label": param,
            "y_label": f"normalised {metric}",
        }
    )


def time_series(series: pd.DataFrame, column: str = "active_avg", seed: int | None = None) -> Chart:
    """Steps, one per domain: a `SimResult.series` column over time (active vCPUs, fast share, migrations)."""
    if column not in series.columns:
        raise ValueError(f"no column {column!r}; have {list(series.columns)}")
    s = series if seed is None else series[series["seed"] == seed]
    if seed is None and "seed" in s.columns and len(s):
        s = s[s["seed"] == s["seed"].iloc[0]]
    lines = [
        {"name": str(dom), "points": [[_num(t), _num(v)] for t, v in zip(g["t_s"], g[column])]}
        for dom, g in s.groupby("domain", sort=False)
    ]
    return Chart(
        {
            "kind": "line",
            "title": column,
            "series": lines,
            "style": "steps",
            "x_label": "time (s)",
            "y_label": column,
            "y_from_zero": True,
        }
    )


def cdf(values: Iterable[float] | pd.Series, label: str = "values") -> Chart:
    """Empirical CDF of ``values`` (one step line: the fraction of values ≤ x)."""
    v = np.sort(np.asarray(list(values), dtype=float))
    if len(v) == 0:
        raise ValueError("cdf of no values")
    pts = [[float(x), (i + 1) / len(v)] for i, x in enumerate(v)]
    return Chart(
        {
            "kind": "line",
            "title": f"CDF of {label}",
            "series": [{"name": label, "points": pts}],
            "style": "steps",
            "x_label": label,
            "y_label": "fraction ≤ x",
            "y_from_zero": True,
        }
    )


def points_vs_power(df: pd.DataFrame, power: str, metric: str = "completion_s", by: str | None = None) -> Chart:
    """Every row as a point: ``metric`` against a machine's compute power column (e.g. Σ speeds), one series per
    ``by`` value (markers of different series at the same x are set side by side)."""
    groups = [(metric, df)] if by is None else list(df.groupby(by, sort=False))
    series = [
        {"name": str(key), "points": [[_num(x), _num(y)] for x, y in zip(g[power], g[metric])]} for key, g in groups
    ]
    return Chart(
        {
            "kind": "line",
            "title": f"{metric} against {power}",
            "series": series,
            "style": "points",
            "x_label": power,
            "y_label": metric,
        }
    )
