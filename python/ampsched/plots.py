"""Plot helpers (matplotlib) for the figures the reports draw, usable from a notebook.

Every helper takes DataFrames as returned by `simulate` (`SimResult.series`)
or `sweep`, draws on ``ax`` (a new figure when ``None``) and returns the Axes.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd


def _ax(ax):
    if ax is None:
        import matplotlib.pyplot as plt

        _, ax = plt.subplots(figsize=(7, 4))
    return ax


def completion_stacked(df: pd.DataFrame, by: str = "placer", metric: str = "completion_s", ax=None):
    """Stacked bars, one per value of ``by``: each domain's mean ``metric`` over seeds, with its stdev."""
    ax = _ax(ax)
    g = df.groupby([by, "domain"], sort=False)[metric]
    mean, std = g.mean().unstack("domain"), g.std().fillna(0.0).unstack("domain")
    x = np.arange(len(mean.index))
    bottom = np.zeros(len(x))
    for dom in mean.columns:
        h = mean[dom].fillna(0.0).to_numpy()
        ax.bar(x, h, bottom=bottom, label=str(dom), yerr=std[dom].to_numpy(), capsize=3)
        bottom += h
    ax.set_xticks(x, [str(i) for i in mean.index])
    ax.set_xlabel(by)
    ax.set_ylabel(f"{metric} (stacked per domain, ± stdev)")
    ax.legend(fontsize="small")
    return ax


def speedup_bars(df: pd.DataFrame, baseline: str, by: str = "placer", metric: str = "completion_s", ax=None):
    """Grouped bars: per domain, speedup of each ``by`` value over ``baseline`` (mean ``metric`` ratio)."""
    ax = _ax(ax)
    mean = df.groupby(["domain", by], sort=False)[metric].mean().unstack(by)
    if baseline not in mean.columns:
        raise ValueError(f"baseline {baseline!r} is not a value of {by!r}: {list(mean.columns)}")
    others = [c for c in mean.columns if c != baseline]
    x = np.arange(len(mean.index))
    w = 0.8 / max(len(others), 1)
    for i, c in enumerate(others):
        ax.bar(x + i * w, (mean[baseline] / mean[c]).to_numpy(), width=w, label=str(c))
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(x + w * (len(others) - 1) / 2, [str(d) for d in mean.index])
    ax.set_ylabel(f"speedup over {baseline}")
    ax.legend(fontsize="small")
    return ax


def normalized_vs_param(df: pd.DataFrame, param: str, metric: str = "completion_s", by: str = "domain", ax=None):
    """Lines, one per ``by`` value: mean ``metric`` against ``param`` (e.g. a timeslice), normalised to the first."""
    ax = _ax(ax)
    mean = df.groupby([by, param])[metric].mean().unstack(param)
    for key, row in mean.iterrows():
        ax.plot(list(row.index), (row / row.iloc[0]).to_numpy(), marker="o", label=str(key))
    ax.set_xlabel(param)
    ax.set_ylabel(f"normalised {metric}")
    ax.legend(fontsize="small")
    return ax


def time_series(series: pd.DataFrame, column: str = "active_avg", seed: int | None = None, ax=None):
    """Lines, one per domain: a `SimResult.series` column over time (active vCPUs, fast share, migrations)."""
    ax = _ax(ax)
    if column not in series.columns:
        raise ValueError(f"no column {column!r}; have {list(series.columns)}")
    s = series if seed is None else series[series["seed"] == seed]
    if seed is None and "seed" in s.columns and len(s):
        s = s[s["seed"] == s["seed"].iloc[0]]
    for dom, g in s.groupby("domain", sort=False):
        ax.plot(g["t_s"].to_numpy(), g[column].to_numpy(), label=str(dom))
    ax.set_xlabel("time (s)")
    ax.set_ylabel(column)
    ax.legend(fontsize="small")
    return ax


def cdf(values: Iterable[float] | pd.Series, label: str | None = None, ax=None):
    """Empirical CDF of ``values`` (one step line)."""
    ax = _ax(ax)
    v = np.sort(np.asarray(list(values), dtype=float))
    if len(v) == 0:
        raise ValueError("cdf of no values")
    ax.step(v, np.arange(1, len(v) + 1) / len(v), where="post", label=label)
    ax.set_ylabel("fraction ≤ x")
    ax.set_ylim(0, 1.02)
    if label:
        ax.legend(fontsize="small")
    return ax


def points_vs_power(
    df: pd.DataFrame, power: str, metric: str = "completion_s", by: str | None = None, ax=None
) -> object:
    """Scatter of ``metric`` against a machine's compute power column (e.g. Σ speeds), one colour per ``by``."""
    ax = _ax(ax)
    groups: Sequence = [(None, df)] if by is None else list(df.groupby(by, sort=False))
    for key, g in groups:
        ax.scatter(g[power].to_numpy(), g[metric].to_numpy(), label=None if key is None else str(key))
    ax.set_xlabel(power)
    ax.set_ylabel(metric)
    if by is not None:
        ax.legend(fontsize="small")
    return ax
