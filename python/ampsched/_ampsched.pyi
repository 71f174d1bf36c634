"""Typed stubs of the native module (Rust, PyO3): translation only."""

SCHEMA: str

class AmpschedError(ValueError):
    """A bad scenario, policy, parameter or file (the message names the file, line and field)."""

def simulate(
    scenario: str,
    is_path: bool,
    dispatcher: str | None = None,
    dispatcher_params: str | None = None,
    placer: str | None = None,
    placer_params: str | None = None,
    seed: int | None = None,
    runs: int | None = None,
    trace: bool = False,
    trace_period_ms: float = 10.0,
    allow_large: bool = False,
) -> tuple[str, list[bytes]]:
    """Simulate; returns the ``ampsched.sim/1`` JSON text and one Perfetto trace per run when ``trace``.

    A run estimated past the admission limits (2e9 events, 4 GiB) is refused unless ``allow_large``."""

def policies_json() -> str:
    """Every dispatcher and placer with its parameters, as JSON."""

def models_json() -> str:
    """The workload model library, as JSON."""

def chart_svg(spec_json: str) -> str:
    """Draw a chart spec (JSON, as built by ``ampsched.plots``) as SVG with the reports' renderer."""

def chart_reading(spec_json: str) -> str:
    """The caption sentence saying how to read a chart spec (JSON)."""
