"""`ampsched.sweep`: cross products on a process pool and on a Dask LocalCluster."""

from __future__ import annotations

import pytest

import ampsched

from conftest import WEIGHTS


def _check(df):
    # 2 dispatchers × 2 seeds × 2 timeslices = 8 points, 2 domains each
    assert len(df) == 16
    assert list(df.columns[:5]) == ["scenario", "dispatcher", "placer", "seed", "tslice_ms"]
    assert set(df["dispatcher"]) == {"credit", "xen40"}
    assert set(df["tslice_ms"]) == {10, 30}
    assert (df["scenario"] == "weights").all()
    # every point ran the full 3 s with the CPU always busy
    per_point = df.groupby(["dispatcher", "seed", "tslice_ms"])["cpu_s"].sum()
    assert per_point.to_numpy() == pytest.approx([3.0] * 8)


def test_sweep_on_the_local_process_pool(capsys):
    df = ampsched.sweep(WEIGHTS, dispatchers=["credit", "xen40"], seeds=2, params_grid={"tslice_ms": [10, 30]})
    _check(df)
    # the same point run alone gives the same numbers
    one = ampsched.simulate(WEIGHTS, dispatcher="xen40", seed=2, params={"tslice_ms": 10}).domains
    row = df[(df.dispatcher == "xen40") & (df.seed == 2) & (df.tslice_ms == 10)]
    assert row["cpu_s"].tolist() == one["cpu_s"].tolist()
    err = capsys.readouterr().err
    assert "8/8" in err or "8it" in err or "8/8 [" in err, err


def test_sweep_on_dask_localcluster_matches_local():
    distributed = pytest.importorskip("distributed")
    local = ampsched.sweep(
        WEIGHTS, dispatchers=["credit", "xen40"], seeds=2, params_grid={"tslice_ms": [10, 30]}, progress=False
    )
    for n in (1, 2):
        with distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None) as c:
            with distributed.Client(c) as client:
                df = ampsched.sweep(
                    WEIGHTS,
                    dispatchers=["credit", "xen40"],
                    seeds=2,
                    params_grid={"tslice_ms": [10, 30]},
                    executor=client,
                    progress=False,
                )
        _check(df)
        assert df.equals(local), f"{n} Dask workers gave other results than the local pool"


def test_sweep_rejects_unknown_executors():
    with pytest.raises(TypeError, match="executor"):
        ampsched.sweep(WEIGHTS, executor=object(), progress=False)
