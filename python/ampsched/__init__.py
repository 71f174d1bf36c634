"""ampsched: asymmetry-aware scheduling for heterogeneous multicores, from Python.

>>> import ampsched
>>> r = ampsched.simulate("scenarios/examples/quickstart.toml", placer="aash", seed=1)
>>> r.domains[["domain", "completion_s"]]

`simulate` runs the Rust simulator (same results as ``ampsched sim``) and
returns a `SimResult` with pandas DataFrames; `sweep` runs a cross product
of scenarios, policies, seeds and parameters on a process pool, a
``dask.distributed`` cluster or Ray; `ampsched.plots` draws the reports'
figures (SVG, with the same renderer as ``ampsched reproduce``).
"""

from __future__ import annotations

import json

from ._ampsched import SCHEMA, AmpschedError
from ._ampsched import models_json as _models_json
from ._ampsched import policies_json as _policies_json
from .result import SimResult, simulate
from .sweep import sweep

__all__ = ["SCHEMA", "AmpschedError", "SimResult", "simulate", "sweep", "policies", "models"]


def policies() -> list[dict]:
    """Every dispatcher and placer with its parameters and defaults (as ``ampsched policies``)."""
    return json.loads(_policies_json())


def models() -> list[dict]:
    """The workload model library (as ``ampsched models``)."""
    return json.loads(_models_json())
