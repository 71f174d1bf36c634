#!/usr/bin/env python3
"""What a model change moved in a reproduction: two `ampsched reproduce STUDY --out DIR` outputs compared.

Reads DIR/summary.json of both, and prints
- the speedup rows (metric ending in `speedup_pct`) that moved, largest first, and how many
  moved by more than `--points`;
- the baseline's spread over seeds, (max - min) / mean of its completion per case (subject
  `all`, metric `completion_s` or `exec_s`), median and largest, before and after.
docs/design/calibration.md reports these figures for each model change.

    ampsched reproduce aash --out /tmp/before      # on the old build
    ampsched reproduce aash --out /tmp/after       # on the new one
    scripts/summary-diff.py /tmp/before /tmp/after --top 10
"""

import argparse
import json
import statistics
import sys
from pathlib import Path


def load(d: str) -> list[dict]:
    """The summary rows of a reproduction's output directory."""
    p = Path(d) / "summary.json"
    try:
        return json.loads(p.read_text())["rows"]
    except FileNotFoundError:
        sys.exit(f"{p}: not found (give a directory written by `ampsched reproduce STUDY --out DIR`)")
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        sys.exit(f"{p}: not a reproduction summary ({e})")


def key(r: dict) -> tuple:
    """A row's identity across two runs of the same study."""
    return (r["experiment"], r["case"], r["subject"], r["policy"], r["metric"])


def spread(rows: list[dict], baseline: str) -> tuple[int, float, float, str]:
    """Cases, median and largest (max - min) / mean in %, and the largest's case, for `baseline`."""
    s = sorted(
        ((r["max"] - r["min"]) / r["mean"] * 100, f"{r['experiment']}/{r['case']}")
        for r in rows
        if r["policy"] == baseline
        and r["subject"] == "all"
        and r["metric"] in ("completion_s", "exec_s")
        and r["mean"] > 0
    )
    if not s:
        return 0, 0.0, 0.0, "-"
    return len(s), statistics.median(x for x, _ in s), s[-1][0], s[-1][1]


def main() -> int:
    """Compare two summaries and print what moved."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", help="output directory of the old build's reproduction")
    ap.add_argument("after", help="output directory of the new build's reproduction")
    ap.add_argument("--points", type=float, default=1.0, help="a row moved if by more than this (default 1)")
    ap.add_argument("--top", type=int, default=10, help="how many of the largest moves to list (default 10)")
    ap.add_argument("--baseline", default="credit", help="the policy whose spread over seeds is shown (default credit)")
    a = ap.parse_args()
    if a.points < 0 or a.top < 0:
        print(f"--points {a.points} / --top {a.top}: must be at least 0", file=sys.stderr)
        return 2
    before, after = load(a.before), load(a.after)
    b = {key(r): r for r in before}
    moved = []
    for r in after:
        k = key(r)
        if k[4].endswith("speedup_pct") and k in b:
            moved.append((abs(r["mean"] - b[k]["mean"]), k, b[k]["mean"], r["mean"]))
    moved.sort(key=lambda m: (-m[0], m[1]))
    over = sum(1 for m in moved if m[0] > a.points)
    print(f"speedup rows: {len(moved)}, moved by more than {a.points:g} points: {over}")
    for _, k, x, y in moved[: a.top]:
        print(f"  {'/'.join(k):<80} {x:9.2f} -> {y:9.2f}")
    for label, rows in (("before", before), ("after", after)):
        n, med, top, case = spread(rows, a.baseline)
        print(f"{a.baseline} spread over seeds, {label}: {n} cases, median {med:.3f} %, largest {top:.1f} % ({case})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
