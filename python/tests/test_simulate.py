"""`ampsched.simulate`: DataFrames, raw JSON, overrides, traces and errors."""

from __future__ import annotations

import json

import pandas as pd
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


def test_a_missing_path_says_no_such_file(tmp_path):
    # A path, a str ending in .toml or a one-line str without `=` is a file
    # name, never parsed as TOML text ('<scenario>:1:1: invalid key').
    for missing in (tmp_path / "nope.toml", "/nonexistent.toml", "scenarios/none"):
        with pytest.raises(FileNotFoundError, match="no such scenario file") as e:
            ampsched.simulate(missing)
        assert str(missing) in str(e.value)
    with pytest.raises(FileNotFoundError):
        ampsched.simulate(tmp_path)  # a directory is not a scenario file


def test_the_trace_decodes_with_perfettos_official_protos(quickstart):
    """The trace is a valid `perfetto.protos.Trace` for Perfetto's own protos
    (the `perfetto` package's perfetto_trace_pb2), not only for our reader."""
    pb2 = pytest.importorskip("perfetto.protos.perfetto.trace.perfetto_trace_pb2")
    r = ampsched.simulate(quickstart, trace=True, trace_period_ms=50)
    trace = pb2.Trace.FromString(r.traces[0])
    kinds = [p.WhichOneof("data") for p in trace.packet]
    assert set(kinds) == {"process_tree", "track_descriptor", "ftrace_events", "track_event"}
    tree = next(p.process_tree for p in trace.packet if p.HasField("process_tree"))
    names = {t.name for t in tree.threads}
    # every vCPU of the quickstart's three domains is a thread named domain/vN
    assert {f"{d}/v0" for d in r.domains["domain"]} <= names
    switches = [
        e.sched_switch
        for p in trace.packet
        if p.HasField("ftrace_events")
        for e in p.ftrace_events.event
        if e.HasField("sched_switch")
    ]
    assert switches and {s.next_comm for s in switches if s.next_pid} <= names
    # counters are double values on tracks declared by a counter descriptor
    counter_tracks = {p.track_descriptor.uuid for p in trace.packet if p.track_descriptor.HasField("counter")}
    values = [p.track_event for p in trace.packet if p.HasField("track_event")]
    assert values and all(v.track_uuid in counter_tracks and v.type == v.TYPE_COUNTER for v in values)
    assert all(v.HasField("double_counter_value") for v in values)


def test_rtapp_scenario_from_python(root):
    r = ampsched.simulate(root / "scenarios" / "rtapp" / "prodcons.toml")
    assert bool(r.summary.loc[0, "all_done"])
    assert len(r.tasks) == 3
    # rt-app's thread names, as in the real run's trace
    assert list(r.tasks["thread"]) == ["producer", "consumer-0", "consumer-1"]
    assert set(r.tasks["domain"]) == {"pc"}


def test_periodic_rtapp_threads_report_slack_and_deadline_misses(root):
    r = ampsched.simulate(root / "scenarios" / "rtapp" / "periodic.toml", runs=1)
    t = r.tasks.set_index("thread")
    # render, decode-0, decode-1 reach `timer` events; hog has none
    assert t.loc["render", "periods"] >= 298
    assert t.loc["render", "slack_max_s"] < 0.016667
    assert 0 <= t.loc["decode-0", "deadline_misses"] <= t.loc["decode-0", "periods"]
    assert pd.isna(t.loc["hog", "periods"])


def test_policy_and_model_listings():
    names = {(p["kind"], p["name"]) for p in ampsched.policies()}
    assert {("dispatcher", "credit"), ("placer", "aash")} <= names
    assert any(m["name"] == "blackscholes" for m in ampsched.models())


def test_admission_refuses_a_large_run_unless_allow_large(tmp_path):
    # Issue 18 D2: 1024 CPUs, 10 000 vCPUs, 1e6 s simulated was accepted silently.
    huge = tmp_path / "huge.toml"
    doms = "".join(
        f'[[domain]]\nname = "vm{i}"\nvcpus = 1000\nworkload = {{ model = "cpu-bound" }}\n' for i in range(10)
    )
    huge.write_text(
        'stop = { duration_s = 1e6 }\n[machine]\ncpus = [{ class = "fast", count = 256 }, '
        '{ class = "slow", count = 768 }]\n' + doms
    )
    with pytest.raises(ampsched.AmpschedError) as e:
        ampsched.simulate(huge)
    msg = str(e.value)
    assert "huge.toml" in msg and "events > the limit of 2e9" in msg and "allow_large=True" in msg
