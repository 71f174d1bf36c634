"""`sweep`: the cross product of scenarios, policies, seeds and parameters, run
on a local process pool, a ``dask.distributed`` cluster or Ray, gathered into
one DataFrame with the sweep coordinates as columns."""

from __future__ import annotations

import itertools
import os
import sys
from concurrent.futures import Executor, ProcessPoolExecutor, as_completed
from typing import Any, Iterable, Mapping, Sequence

import pandas as pd

COORDS = ["scenario", "dispatcher", "placer", "seed"]


def _grid(params_grid: Mapping[str, Sequence[Any]] | None) -> list[dict]:
    if not params_grid:
        return [{}]
    keys = list(params_grid)
    return [dict(zip(keys, vals)) for vals in itertools.product(*(params_grid[k] for k in keys))]


def _label(scenario: str) -> str:
    if "\n" in scenario:
        for line in scenario.splitlines():
            if line.strip().startswith("name"):
                return line.split("=", 1)[1].strip().strip("\"'")
        return "<scenario>"
    return scenario


def run_job(job: dict) -> list[dict]:
    """Run one point of a sweep (in a worker); one row per domain.

    Top level (picklable) so process pools, Dask and Ray can ship it.
    """
    from .result import simulate

    r = simulate(
        job["scenario"], dispatcher=job["dispatcher"], placer=job["placer"], seed=job["seed"], params=job["params"]
    )
    run = r.runs[0]
    doms = r.domains
    rows = []
    for rec in doms.to_dict("records"):
        row = {"scenario": job["label"], "dispatcher": run["dispatcher"], "placer": run["placer"], "seed": run["seed"]}
        row.update(job["params"])
        rec.pop("seed", None)
        row.update(rec)
        row["end_s"] = run["end_ns"] / 1e9
        row["all_done"] = run["all_done"]
        row["fast_idle_slow_busy_s"] = run["fast_idle_slow_busy_ns"] / 1e9
        rows.append(row)
    return rows


class _Progress:
    """tqdm when installed, else a one-line counter on stderr."""

    def __init__(self, total: int, enabled: bool):
        self.total, self.done, self.bar = total, 0, None
        self.enabled = enabled
        if enabled:
            try:
                from tqdm.auto import tqdm

                self.bar = tqdm(total=total, desc="ampsched sweep", unit="run")
            except ImportError:
                self.bar = None

    def step(self) -> None:
        self.done += 1
        if not self.enabled:
            return
        if self.bar is not None:
            self.bar.update(1)
        else:
            print(f"\rampsched sweep: {self.done}/{self.total} runs", end="", file=sys.stderr, flush=True)
            if self.done == self.total:
                print(file=sys.stderr)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _kind(executor: Any) -> str:
    if executor is None:
        return "local"
    if executor == "ray" or getattr(executor, "__name__", "") == "ray":
        return "ray"
    mod = type(executor).__module__
    if mod.startswith("distributed") or mod.startswith("dask"):
        return "dask"
    if isinstance(executor, Executor):
        return "executor"
    raise TypeError(
        f"executor must be None (local process pool), a concurrent.futures.Executor, "
        f"a dask.distributed.Client or 'ray'; got {type(executor).__name__}"
    )


def sweep(
    scenarios: str | os.PathLike | Iterable[str | os.PathLike],
    dispatchers: Sequence[str | None] | None = None,
    placers: Sequence[str | None] | None = None,
    seeds: Sequence[int] | int = (1,),
    params_grid: Mapping[str, Sequence[Any]] | None = None,
    executor: Any = None,
    progress: bool = True,
    max_workers: int | None = None,
) -> pd.DataFrame:
    """Run every combination of scenarios × dispatchers × placers × seeds × parameter values.

    ``scenarios``: file paths (or TOML texts). ``dispatchers``/``placers``:
    policy names (``None`` = the file's). ``seeds``: a list, or a count (1..n).
    ``params_grid``: ``{"tslice_ms": [10, 30], "placer.period_ms": [50, 100]}``
    (keys as in `simulate`'s ``params``). ``executor``: ``None`` for a local
    process pool (``max_workers``), any ``concurrent.futures.Executor``, a
    ``dask.distributed.Client`` (the cluster runs the points), or ``"ray"``.
    Progress is shown with tqdm when installed (else a counter on stderr).

    Returns one DataFrame, one row per (point, domain), in sweep order: the
    coordinates (scenario, dispatcher, placer, seed and one column per
    parameter) then the domain's results (as `SimResult.domains`) and the run's
    ``end_s``, ``all_done`` and ``fast_idle_slow_busy_s``.
    """
    if isinstance(scenarios, (str, os.PathLike)):
        scenarios = [scenarios]
    scen = [os.fspath(s) for s in scenarios]
    if isinstance(seeds, int):
        seeds = list(range(1, seeds + 1))
    jobs = [
        {"scenario": s, "label": _label(s), "dispatcher": d, "placer": p, "seed": seed, "params": prm}
        for s in scen
        for d in (dispatchers or [None])
        for p in (placers or [None])
        for seed in seeds
        for prm in _grid(params_grid)
    ]
    if not jobs:
        raise ValueError("the sweep is empty: give at least one scenario and one seed")
    kind = _kind(executor)
    bar = _Progress(len(jobs), progress)
    results: list[list[dict] | None] = [None] * len(jobs)
    try:
        if kind == "dask":
            from distributed import as_completed as dask_completed

            futures = executor.map(run_job, jobs, pure=False)
            index = {f.key: i for i, f in enumerate(futures)}
            for f in dask_completed(futures):
                results[index[f.key]] = f.result()
                bar.step()
        elif kind == "ray":
            import ray

            remote = ray.remote(run_job)
            refs = [remote.remote(j) for j in jobs]
            index = {r: i for i, r in enumerate(refs)}
            pending = list(refs)
            while pending:
                ready, pending = ray.wait(pending, num_returns=1)
                for r in ready:
                    results[index[r]] = ray.get(r)
                    bar.step()
        else:
            own = kind == "local"
            pool = ProcessPoolExecutor(max_workers=max_workers) if own else executor
            try:
                futs = {pool.submit(run_job, j): i for i, j in enumerate(jobs)}
                for f in as_completed(futs):
                    results[futs[f]] = f.result()
                    bar.step()
            finally:
                if own:
                    pool.shutdown()
    finally:
        bar.close()
    rows = [row for rs in results for row in (rs or [])]
    df = pd.DataFrame(rows)
    first = COORDS + [k for k in _grid(params_grid)[0]]
    return df[first + [c for c in df.columns if c not in first]]
