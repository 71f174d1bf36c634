"""`ampsched.simulate`: DataFrames, raw JSON, overrides, traces and errors."""

from __future__ import annotations

import json

import pytest

import ampsched

from conftest import WEIGHTS


def test_weights_share_one_cpu_one_third_two_thirds():
    r = ampsched.simulate(WEIGHTS)
    d = r.domains.set_index("domain")
    # 300 credits per 30 ms shared 256:512 → a runs 3 s × 1/3 = 1 s, b 2 s (± 2 % of the CPU)
    assert d.loc["a", "cpu_s"] == pytest.approx(1.0, abs=0.06)
    assert d.loc["b", "cpu_s"] == pytest.approx(2.0, abs=0.06)
    # the CPU never idles: 1 + 2 = 3 s
    assert d["cpu_s"].sum() == pytest.approx(3.0, abs=1e-9)
    assert r.cpus.loc[0, "busy_s"] == pytest.approx(3.0, abs=1e-9)


def test_raw_json_is_the_simulator_schema_and_frames_mirror_it(quickstart):
    r = ampsched.simulate(quickstart, seed=2, runs=2)
    assert r.raw["schema"] == ampsched.SCHEMA == "ampsched.sim/1"
    assert [run["seed"] for run in r.runs] == [2, 3]
    assert json.loads(r.json) == r.raw
    # one row per domain and run; seconds are the JSON's nanoseconds / 1e9
    n_dom = len(r.runs[0]["domains"])
    assert len(r.domains) == 2 * n_dom
    first = r.runs[0]["domains"][0]
    row = r.domains.iloc[0]
    assert row["domain"] == first["name"]
    assert row["wait_s"] == first["wait_ns"] / 1e9
    assert set(r.tasks.columns) >= {"seed", "domain", "vcpu", "fast_s", "slow_s", "completion_s"}
    # series: one row per domain and interval; the run time per class adds up to the domain's
    s = r.series[r.series["seed"] == 2]
    web = s[s["domain"] == first["name"]]
    total = (first["cpu_ns"]["fast"] + first["cpu_ns"]["slow"]) / 1e9
    assert web[["fast_s", "slow_s"]].to_numpy().sum() == pytest.approx(total)
    assert ((s["fast_share"] >= 0) & (s["fast_share"] <= 1)).all()
    assert list(r.summary["seed"]) == [2, 3]


def test_same_input_and_seed_same_result(quickstart):
    a = ampsched.simulate(quickstart, seed=4).json
    b = ampsched.simulate(str(quickstart), seed=4).json
    text = quickstart.read_text()
    c = ampsched.simulate(text, seed=4)
    assert a == b
    # from text the scenario keeps its own name
    assert c.domains["cpu_s"].tolist() == ampsched.simulate(quickstart, seed=4).domains["cpu_s"].tolist()


def test_policy_overrides_and_params(quickstart):
    base = ampsched.simulate(WEIGHTS)
    assert base.runs[0]["dispatcher"] == "credit"
    fair = ampsched.simulate(WEIGHTS, dispatcher="fair")
    assert fair.runs[0]["dispatcher"] == "fair"
    # accounting every timeslice before the 3 s end: at 30, 60, …, 2970 ms = 99 periods;
    # with a 10 ms timeslice at 10, 20, …, 2990 ms = 299
    assert base.summary.loc[0, "counter.accountings"] == 99
    short = ampsched.simulate(WEIGHTS, params={"tslice_ms": 10})
    assert short.summary.loc[0, "counter.accountings"] == 299
    aash = ampsched.simulate(quickstart, placer="aash", params={"placer.period_ms": 100})
    assert aash.runs[0]["placer"] == "aash"


def test_trace_bytes_per_run(quickstart):
    r = ampsched.simulate(quickstart, runs=2, trace=True, trace_period_ms=50)
    assert len(r.traces) == 2 and all(isinstance(t, bytes) and len(t) > 1000 for t in r.traces)
    # a Trace message: field 1, wire type 2 (a packet) first
    assert r.traces[0][0] == 0x0A
    assert r.json == ampsched.simulate(quickstart, runs=2).json, "tracing does not change results"


def test_errors_are_ampsched_errors_naming_the_place(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[machine]\ncpus = [{ class = "turbo" }]\n[[domain]]\nname = "a"\nvcpus = 1\n')
    with pytest.raises(ampsched.AmpschedError) as e:
        ampsched.simulate(bad)
    assert "bad.toml:2" in str(e.value) and "turbo" in str(e.value)
    assert isinstance(e.value, ValueError)
    with pytest.raises(ampsched.AmpschedError, match="unknown dispatcher|no dispatcher|dispatcher"):
        ampsched.simulate(WEIGHTS, dispatcher="nope")
    with pytest.raises(ampsched.AmpschedError, match="tslice_ms"):
        ampsched.simulate(WEIGHTS, params={"tslice_ms": "fast"})
    with pytest.raises(ampsched.AmpschedError, match="runs"):
        ampsched.simulate(WEIGHTS, runs=0)


def test_rtapp_scenario_from_python(root):
    r = ampsched.simulate(root / "scenarios" / "rtapp" / "prodcons.toml")
    assert bool(r.summary.loc[0, "all_done"])
    assert len(r.tasks) == 3


def test_policy_and_model_listings():
    names = {(p["kind"], p["name"]) for p in ampsched.policies()}
    assert {("dispatcher", "credit"), ("placer", "aash")} <= names
    assert any(m["name"] == "blackscholes" for m in ampsched.models())
