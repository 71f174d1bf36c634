"""Plot helpers build the reports' charts from DataFrames and draw them with the reports' renderer."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pandas as pd
import pytest

import ampsched
from ampsched import plots

from conftest import WEIGHTS

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def sweep_df() -> pd.DataFrame:
    return ampsched.sweep(
        WEIGHTS, dispatchers=["credit", "xen40"], seeds=2, params_grid={"tslice_ms": [10, 30]}, progress=False
    )


def drawn(chart: plots.Chart) -> ET.Element:
    """The chart's SVG, parsed (it must be well-formed XML with the chart's title)."""
    root = ET.fromstring(chart.svg)
    assert root.tag == f"{SVG}svg"
    assert root.find(f"{SVG}title").text == chart.spec["title"]
    return root


def test_completion_stacked_has_one_segment_per_domain_and_config(sweep_df):
    c = plots.completion_stacked(sweep_df, by="dispatcher", metric="cpu_s")
    assert c.spec["stacked"] and c.spec["categories"] == ["credit", "xen40"]
    # 2 domains stacked in each of 2 configs; one CPU for 3 s: the segments add up to 3 s of CPU
    assert [s["name"] for s in c.spec["series"]] == ["a", "b"]
    totals = [sum(s["values"][i] for s in c.spec["series"]) for i in range(2)]
    assert totals == pytest.approx([3.0, 3.0])
    # weights 256 : 512 → domain a gets 1 s, b 2 s
    assert c.spec["series"][0]["values"][0] == pytest.approx(1.0, rel=0.05)
    svg = drawn(c)
    # 4 segments + 2 legend swatches in the two series' colours
    fills = [r.get("fill") for r in svg.iter(f"{SVG}rect")]
    assert (fills.count("#0072B2"), fills.count("#E69F00")) == (3, 3)
    assert "stacks one segment per series" in c.reading


def test_speedup_bars_against_a_baseline(sweep_df):
    c = plots.speedup_bars(sweep_df, baseline="credit", by="dispatcher", metric="cpu_s")
    assert [s["name"] for s in c.spec["series"]] == ["xen40"]  # 1 other config, 2 domains
    assert len(c.spec["series"][0]["values"]) == 2 and c.spec["reference"] == 1.0
    assert "dashed red line marks 1" in c.reading
    drawn(c)
    with pytest.raises(ValueError, match="baseline"):
        plots.speedup_bars(sweep_df, baseline="nope", by="dispatcher")


def test_normalised_lines_start_at_one(sweep_df):
    c = plots.normalized_vs_param(sweep_df, "tslice_ms", metric="cpu_s")
    assert len(c.spec["series"]) == 2
    assert all(s["points"][0][1] == pytest.approx(1.0) for s in c.spec["series"])
    assert [p[0] for p in c.spec["series"][0]["points"]] == [10.0, 30.0]
    # one 2 px line per domain
    assert len([p for p in drawn(c).iter(f"{SVG}polyline") if p.get("stroke-width") == "2"]) == 2


def test_time_series_cdf_and_points(quickstart, tmp_path):
    r = ampsched.simulate(quickstart, runs=2)
    c = plots.time_series(r.series, "active_avg")
    assert len(c.spec["series"]) == r.series["domain"].nunique()
    drawn(c)
    with pytest.raises(ValueError, match="no column"):
        plots.time_series(r.series, "nope")
    c = plots.cdf(r.tasks["wait_s"], label="wait")
    assert c.spec["series"][0]["points"][-1][1] == pytest.approx(1.0)
    drawn(c)
    df = pd.DataFrame({"power": [4, 5, 6], "completion_s": [3.0, 2.5, 2.0], "cfg": ["a", "b", "b"]})
    c = plots.points_vs_power(df, "power", by="cfg")
    assert [len(s["points"]) for s in c.spec["series"]] == [1, 2]
    assert "side by side" in c.reading
    # the figure is the same bytes each time, and saves as a file
    assert c.save(tmp_path / "p.svg").read_text(encoding="utf-8") == c.svg == c._repr_svg_()


def test_a_bad_spec_is_a_clear_error():
    with pytest.raises(ampsched.AmpschedError, match="chart spec"):
        _ = plots.Chart({"kind": "pie", "title": "t"}).svg
