#!/usr/bin/env python3
"""Where an idling guest's vCPUs are when its programs start, under Xen 4.0's credit.

Runs the probe `scenarios/aash-probe/boot-idle.toml` (the aash-aware machine: 2 fast and
2 slow pCPUs, dom0 and a 4-vCPU guest that idles before its programs start) with four
identical CPU-bound programs, and counts, per vCPU, the seeds in which its program ran on a
fast pCPU throughout: such a program ends within `--margin` s of the first one (a whole run
on a fast pCPU takes about half as long as one on a slow pCPU). A uniform placement reads
runs / 2 per vCPU and runs / 6 for any one pair. docs/design/calibration.md ("A booted
guest's idle time", "The idlers' race") reports these counts.

    scripts/aash-probe-placement.py --runs 48
    scripts/aash-probe-placement.py --runs 48 --ticks 30000 --bin target/release/ampsched
"""

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROBE = ROOT / "scenarios" / "aash-probe" / "boot-idle.toml"
# The set1 programs made identical: the CPU-bound sixtrack's memory share and working set.
SAME = ["m1=0.03", "m2=0.03", "m3=0.03", "w1=256", "w2=256", "w3=256"]


def main() -> int:
    """Run the probe and print the per-vCPU counts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="ampsched", help="the ampsched binary (default: on PATH)")
    ap.add_argument("--runs", type=int, default=48, help="seeds 1..RUNS (default 48)")
    ap.add_argument("--ticks", type=int, help="idle periods before the start (default: the file's, 3000 s at HZ = 100)")
    ap.add_argument("--tick-ms", type=float, help="idle wake-up period in ms (default: the file's, 10)")
    ap.add_argument(
        "--margin", type=float, default=3.0, help="s after the first program's end that still counts as fast"
    )
    a = ap.parse_args()
    if a.runs < 1:
        print(f"--runs {a.runs}: must be at least 1", file=sys.stderr)
        return 2
    sets = list(SAME)
    if a.ticks is not None:
        sets.append(f"ticks={a.ticks}")
    if a.tick_ms is not None:
        sets.append(f"tick_ms={a.tick_ms}")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "probe.json"
        cmd = [a.bin, "sim", str(PROBE), "--runs", str(a.runs), "--seed", "1", "--json", str(out)]
        for s in sets:
            cmd += ["--set", s]
        try:
            done = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        except OSError as e:
            print(f"--bin {a.bin}: cannot run it ({e.strerror}); give the ampsched binary's path", file=sys.stderr)
            return 2
        if done.returncode != 0:
            print(f"{' '.join(cmd)}: exit {done.returncode}\n{done.stderr}", file=sys.stderr)
            return 1
        runs = json.loads(out.read_text())["runs"]
    fast = [0, 0, 0, 0]
    pairs: dict[tuple[int, ...], int] = {}
    for r in runs:
        vm = next(d["id"] for d in r["domains"] if d["name"] == "vm")
        ends = {t["vcpu"]: t["completion_ns"] / 1e9 for t in r["tasks"] if t["domain"] == vm}
        first = min(ends.values())
        on_fast = tuple(sorted(v for v, e in ends.items() if e < first + a.margin))
        for v in on_fast:
            fast[v] += 1
        pairs[on_fast] = pairs.get(on_fast, 0) + 1
    print(
        f"{len(runs)} seeds; runs on a fast pCPU throughout, per vCPU: "
        + ", ".join(f"vCPU {v} {n}" for v, n in enumerate(fast))
    )
    print(
        "fast sets: "
        + ", ".join(f"{{{', '.join(map(str, k))}}} {n}" for k, n in sorted(pairs.items(), key=lambda kv: -kv[1]))
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
