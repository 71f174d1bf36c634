"""Shared fixtures: the repository root and small scenarios."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# One CPU, two CPU-bound domains weighted 256 and 512, 3 s.
WEIGHTS = """
name = "weights"
stop = { duration_s = 3 }
[machine]
cpus = [{ class = "slow" }]
[[domain]]
name = "a"
vcpus = 1
weight = 256
workload = { model = "cpu-bound" }
[[domain]]
name = "b"
vcpus = 1
weight = 512
workload = { model = "cpu-bound" }
"""


@pytest.fixture
def root() -> Path:
    return ROOT


@pytest.fixture
def quickstart() -> Path:
    return ROOT / "scenarios" / "examples" / "quickstart.toml"
