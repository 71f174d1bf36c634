"""Plot helpers draw what they say (headless Agg backend)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import pandas as pd  # noqa: E402
import pytest  # noqa: E402

import ampsched  # noqa: E402
from ampsched import plots  # noqa: E402

from conftest import WEIGHTS  # noqa: E402


@pytest.fixture(scope="module")
def sweep_df() -> pd.DataFrame:
    return ampsched.sweep(
        WEIGHTS, dispatchers=["credit", "xen40"], seeds=2, params_grid={"tslice_ms": [10, 30]}, progress=False
    )


def test_completion_stacked_has_one_segment_per_domain_and_config(sweep_df):
    ax = plots.completion_stacked(sweep_df, by="dispatcher", metric="cpu_s")
    # 2 configs × 2 domains = 4 bar segments; each config stacks to 3 s of CPU
    assert len(ax.patches) == 4
    tops = {}
    for p in ax.patches:
        tops[round(p.get_x(), 3)] = max(tops.get(round(p.get_x(), 3), 0), p.get_y() + p.get_height())
    assert sorted(tops.values()) == pytest.approx([3.0, 3.0])


def test_speedup_bars_against_a_baseline(sweep_df):
    ax = plots.speedup_bars(sweep_df, baseline="credit", by="dispatcher", metric="cpu_s")
    assert len(ax.patches) == 2  # 2 domains × 1 other config
    with pytest.raises(ValueError, match="baseline"):
        plots.speedup_bars(sweep_df, baseline="nope", by="dispatcher")


def test_normalised_lines_start_at_one(sweep_df):
    ax = plots.normalized_vs_param(sweep_df, "tslice_ms", metric="cpu_s")
    assert len(ax.lines) == 2
    assert all(line.get_ydata()[0] == pytest.approx(1.0) for line in ax.lines)


def test_time_series_cdf_and_points(quickstart):
    r = ampsched.simulate(quickstart, runs=2)
    ax = plots.time_series(r.series, "active_avg")
    assert len(ax.lines) == r.series["domain"].nunique()
    with pytest.raises(ValueError, match="no column"):
        plots.time_series(r.series, "nope")
    ax = plots.cdf(r.tasks["wait_s"], label="wait")
    x, y = ax.lines[0].get_data()
    assert y[-1] == pytest.approx(1.0)
    df = pd.DataFrame({"power": [4, 5, 6], "completion_s": [3.0, 2.5, 2.0], "cfg": ["a", "b", "b"]})
    ax = plots.points_vs_power(df, "power", by="cfg")
    assert len(ax.collections) == 2
