"""`simulate` and its result: the simulator's JSON as pandas DataFrames."""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass, field
from typing import Any, Mapping, Union

import pandas as pd

from . import _ampsched

Scenario = Union[str, "os.PathLike[str]"]

NS = 1e9


def _is_path(scenario: Scenario) -> bool:
    """Whether ``scenario`` names a file rather than holding TOML text.

    A path-like object, or a one-line string that names an existing file, ends
    in ``.toml`` or has no ``=`` (a scenario's TOML text always has one). A
    path that does not exist raises `FileNotFoundError` ("no such file").
    """
    if isinstance(scenario, os.PathLike):
        path = os.fspath(scenario)
    elif "\n" not in scenario and (os.path.exists(scenario) or scenario.endswith(".toml") or "=" not in scenario):
        path = scenario
    else:
        return False
    if not os.path.isfile(path):
        raise FileNotFoundError(errno.ENOENT, "no such scenario file", path)
    return True


def split_params(params: Mapping[str, Any] | None) -> tuple[dict, dict]:
    """Split ``{"dispatcher.x": 1, "placer.y": 2, "z": 3}`` into dispatcher and placer parameters.

    Keys without a prefix belong to the dispatcher.
    """
    disp: dict = {}
    plc: dict = {}
    for k, v in (params or {}).items():
        if k.startswith("placer."):
            plc[k[len("placer.") :]] = v
        elif k.startswith("dispatcher."):
            disp[k[len("dispatcher.") :]] = v
        else:
            disp[k] = v
    return disp, plc


@dataclass
class SimResult:
    """The result of `simulate`: one or more runs (seeds) of one scenario.

    DataFrames hold every run, told apart by the ``seed`` column; times are
    in seconds (``*_s``) next to the raw nanoseconds in `raw`.
    """

    raw: dict
    """The simulator's ``ampsched.sim/1`` document (schema in the README)."""
    traces: list[bytes] = field(default_factory=list)
    """Perfetto traces, one per run, when ``trace=True``."""

    @property
    def json(self) -> str:
        """The raw document as JSON text."""
        return json.dumps(self.raw)

    @property
    def runs(self) -> list[dict]:
        """The runs, in seed order."""
        return self.raw["runs"]

    @property
    def summary(self) -> pd.DataFrame:
        """One row per run: scenario, policies, seed, end time, events, fast-idle-while-slow-busy time."""
        rows = []
        for r in self.runs:
            row = {k: r[k] for k in ("scenario", "dispatcher", "placer", "seed", "all_done", "truncated", "events")}
            row["end_s"] = r["end_ns"] / NS
            row["fast_idle_slow_busy_s"] = r["fast_idle_slow_busy_ns"] / NS
            row["placer_changes"] = r["placer_changes"]
            for k, v in r["dispatcher_counters"].items():
                row[f"counter.{k}"] = v
            rows.append(row)
        return pd.DataFrame(rows)

    def _per(self, key: str) -> pd.DataFrame:
        rows = []
        for r in self.runs:
            domains = {d["id"]: d["name"] for d in r["domains"]}
            for x in r[key]:
                row: dict[str, Any] = {"seed": r["seed"]}
                for k, v in x.items():
                    if k == "series":
                        continue
                    if k == "cpu_ns":
                        for cls, ns in v.items():
                            row[f"{cls}_s"] = ns / NS
                        row["cpu_s"] = sum(v.values()) / NS
                    elif k.endswith("_ns"):
                        row[k[:-3] + "_s"] = None if v is None else v / NS
                    elif k == "domain" and key == "tasks":
                        row["domain_id"] = v
                        row["domain"] = domains[v]
                    elif k == "name" and key == "tasks":
                        row["thread"] = v
                    elif k == "name":
                        row["domain"] = v
                    elif k == "periodic":
                        row["periods"] = v["periods"]
                        row["deadline_misses"] = v["deadline_misses"]
                        for s in ("min", "mean", "max"):
                            row[f"slack_{s}_s"] = v[f"slack_{s}_ns"] / NS
                    else:
                        row[k] = v
                if key == "tasks":
                    # rt-app threads keep their own names; other vCPUs are named as in traces
                    row.setdefault("thread", f"{row['domain']}/v{row['vcpu']}")
                rows.append(row)
        return pd.DataFrame(rows)

    @property
    def tasks(self) -> pd.DataFrame:
        """One row per task (vCPU or thread) and run.

        ``thread`` is the rt-app thread name (``render``, ``decode-0``) or
        ``domain/vN``; periodic tasks (rt-app ``timer``) add ``periods``,
        ``deadline_misses`` and ``slack_{min,mean,max}_s`` (rt-app's slack:
        period end minus work end; negative = a missed deadline).
        """
        return self._per("tasks")

    @property
    def domains(self) -> pd.DataFrame:
        """One row per domain (VM or process) and run: completion, run time per CPU class, waits, migrations."""
        return self._per("domains")

    @property
    def cpus(self) -> pd.DataFrame:
        """One row per CPU and run: class, busy, idle and noise time."""
        return self._per("cpus")

    @property
    def series(self) -> pd.DataFrame:
        """The time series: one row per domain, interval and run.

        Columns: ``t_s`` (end of the interval), ``<class>_s`` run time per class,
        ``fast_share`` (the part of the domain's run time on class ``fast``, else on the first class),
        ``active_avg`` (time-averaged active vCPUs), ``migrations``.
        """
        rows = []
        for r in self.runs:
            classes = r["classes"]
            for d in r["domains"]:
                for p in d["series"]:
                    row: dict[str, Any] = {"seed": r["seed"], "domain": d["name"], "t_s": p["t_ns"] / NS}
                    total = sum(p["class_ns"])
                    for cls, ns in zip(classes, p["class_ns"]):
                        row[f"{cls}_s"] = ns / NS
                    fast = classes.index("fast") if "fast" in classes else 0
                    row["fast_share"] = p["class_ns"][fast] / total if total else 0.0
                    row["active_avg"] = p["active_avg"]
                    row["migrations"] = p["migrations"]
                    rows.append(row)
        return pd.DataFrame(rows)


def simulate(
    scenario: Scenario,
    dispatcher: str | None = None,
    placer: str | None = None,
    seed: int | None = None,
    params: Mapping[str, Any] | None = None,
    runs: int | None = 1,
    trace: bool = False,
    trace_period_ms: float = 10.0,
    allow_large: bool = False,
) -> SimResult:
    """Simulate a scenario: a file path or TOML text.

    ``dispatcher``/``placer`` replace the file's policies (keeping the file's
    parameters for the same name); ``params`` sets policy parameters, e.g.
    ``{"tslice_ms": 10, "placer.period_ms": 100}`` (no prefix or
    ``dispatcher.``: the dispatcher's; ``placer.``: the placer's). ``seed`` is
    the first seed (default: the file's), ``runs`` the number of seeds
    (``None``: the file's). ``trace=True`` also records a Perfetto trace per run.
    Raises `AmpschedError` on bad input (the message names file, line and field),
    and on a run estimated past the admission limits (2e9 events, 4 GiB; see
    docs/security.md) unless ``allow_large=True``.
    """
    disp_params, plc_params = split_params(params)
    is_path = _is_path(scenario)
    text = os.fspath(scenario)
    doc, traces = _ampsched.simulate(
        text,
        is_path,
        dispatcher=dispatcher,
        dispatcher_params=json.dumps(disp_params) if disp_params else None,
        placer=placer,
        placer_params=json.dumps(plc_params) if plc_params else None,
        seed=seed,
        runs=runs,
        trace=trace,
        trace_period_ms=trace_period_ms,
        allow_large=allow_large,
    )
    return SimResult(raw=json.loads(doc), traces=list(traces))
