#!/usr/bin/env python3
"""Real-workload benchmark of the agent (issue 15 D6): default Linux against
each placer on real programs, on the development machine's emulated
asymmetry (CPU 1 slowed by `ampsched-hog`, SCHED_FIFO 5 ms spin every 10 ms;
CPU 0 declared fast with `--fast 0`). Prints figures; it is not a test.

    scripts/bench-agent.sh --suite real [--reps 7] [--only W1,W2] [--configs C1,C2]
        [--budget-s 540] [--results FILE] [--job-cpu] [--summary]

Method:
- every run is one command in a session of its own whose autogroup gets
  nice -20 (`setsid`, then `echo -20 > /proc/self/autogroup`, the way
  `ampsched validate` isolates its runs; kernel/sched/autogroup.c): builds at
  nice 19 in other sessions then take a -20 group's share at most, not the
  workload's; the agent and the programs it launches share the session, so
  the same group. The 1-minute load average is recorded with every run;
- the figure is the job's wall time as a user sees it (the agent's start and
  stop included), from the launch of `sh` to its exit;
- interleaved: each repetition runs every workload once under every
  configuration, the configurations in an order rotated per repetition, so
  drifting background load hits all alike;
- resumable: rows are appended to a JSON-lines file and finished
  (workload, configuration, repetition) triples are skipped, so the suite runs
  in chunks (`--budget-s`: stop starting runs after that long) under the
  machine lock; the work sizes are calibrated once (first chunk, under
  default Linux with the hog running, each aimed at about 1 s) and kept in
  `<results>.cal.json`;
- a configuration is `linux` or a placer, optionally with agent settings
  (`aash:period=15`: the agent's `--period`; `aash:time_credits=false`: a
  placer parameter; `aash:bin=PATH`: another build of `ampsched`), so an A/B
  of a setting or of two builds interleaves like the rest;
- agent runs pass `--stats`: each row records the agent's CPU time, its
  affinity changes and class flips; `--job-cpu` also records the job's CPU
  time (a shell runs the job and prints `times`, under every configuration);
- summary: per workload and configuration the median wall time, min-max,
  the ratio of medians to default Linux (< 1 = faster) and, in parentheses,
  the median of the per-repetition ratios (each run against default Linux's
  run of the same repetition); the two-process case also the gap between
  the two processes' completions.
"""

import argparse
import json
import os
import random
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CONFIGS = ["linux", "aash", "capability", "fast-first", "none"]
ISOLATE = 'echo -20 > /proc/self/autogroup 2>/dev/null; exec "$@"'
ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 1.0

WORKLOADS = [
    "stress-ng",
    "stress-ng-short",
    "sysbench",
    "xz",
    "make",
    "numpy",
    "rtapp-forkjoin",
    "barrier-block",
    "barrier-spin",
    "phased",
    "fair2",
]


def load1():
    return float(Path("/proc/loadavg").read_text().split()[0])


def sh(argv, cwd=None, env=None, want_err=False):
    """Run argv isolated (own session, autogroup nice -20); wall seconds (and its stderr if `want_err`)."""
    t = time.perf_counter()
    p = subprocess.run(
        ["sh", "-c", ISOLATE, "sh", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {p.returncode}: {p.stderr.decode()[-400:]}")
    return (wall, p.stderr.decode(errors="replace")) if want_err else wall


# The shell's `times` (dash: two lines, the shell's own then its children's user and system time).
TIMES = re.compile(r"^(\d+)m([\d.]+)s (\d+)m([\d.]+)s$")


def run_extras(err):
    """Figures a run printed on stderr: the agent's `--stats` (its CPU time, affinity changes,
    class flips) and, with `--job-cpu`, the job's CPU time (user + system of its processes)."""
    out = {}
    for line in err.splitlines():
        if line.startswith("ampsched: stats "):
            st = json.loads(line[len("ampsched: stats "):])
            out["agent_cpu_ms"] = round(st["agent_cpu_pct_of_one_cpu"] * st["elapsed_s"] * 10, 2)
            for k in ("changes", "class_flips", "contended_periods", "periods", "idle_events", "reactions",
                      "released_moves", "loop_moves", "loop_wall_us_p99"):
                if k in st:
                    out[k] = st[k]
    times = [m for m in map(TIMES.match, err.splitlines()) if m]
    if times:
        m = times[-1]
        um, us, sm, ss = m.groups()
        out["job_cpu_ms"] = round((60 * int(um) + float(us) + 60 * int(sm) + float(ss)) * 1e3, 1)
    return out


class Ctx:
    def __init__(self, args, tmp):
        b = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
        self.a, self.w, self.hog = str(b / "ampsched"), str(b / "ampsched-workload"), str(b / "ampsched-hog")
        self.tmp = tmp
        self.state = str(tmp / "state.json")
        self.cal = {}
        self.venv = Path(args.venv)
        self.env = dict(os.environ, OPENBLAS_NUM_THREADS="2", OMP_NUM_THREADS="2")
        self.job_cpu = args.job_cpu

    def agent(self, config):
        return [agent_bin(self, config), "run", "--fast", "0", *placer_args(config), "--state", self.state, "--stats",
                "--"]


def agent_bin(ctx, config):
    """The `ampsched` binary of a configuration: `bin=PATH` if given, else the release build."""
    return next((kv[4:] for kv in config.split(":")[1:] if kv.startswith("bin=")), ctx.a)


def placer_args(config):
    """`PLACER[:K=V]...` → the agent's arguments: `period=MS` is the agent's `--period`, any other
    key a placer parameter (`--param K=V`), e.g. `aash:period=60` or `aash:period=60:time_credits=false`."""
    placer, *opts = config.split(":")
    out = ["--placer", placer]
    for kv in opts:
        k, _, v = kv.partition("=")
        if k == "bin":
            continue
        out += ["--period", v] if k == "period" else ["--param", f"{k}={v}"]
    return out


def prepare(ctx):
    """Inputs: the xz data, the C project, rt-app's file with a fixed calibration."""
    t = ctx.tmp
    rnd = random.Random(15)
    words = [
        "".join(rnd.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rnd.randint(2, 9))) for _ in range(5000)
    ]
    with open(t / "xz-base", "w") as f:
        for _ in range(400_000):
            f.write(" ".join(rnd.choice(words) for _ in range(8)) + "\n")
    proj = t / "cproj"
    proj.mkdir(exist_ok=True)
    for i in range(64):
        body = "\n".join(
            f"static double f{i}_{k}(double x) {{ double s = 0; for (int j = 0; j < 64; j++) "
            f"s += (x * j + {k}) / (j + {i + 1}.0); return s; }}"
            for k in range(120)
        )
        calls = " + ".join(f"f{i}_{k}(x)" for k in range(120))
        (proj / f"u{i}.c").write_text(f"{body}\ndouble u{i}(double x) {{ return {calls}; }}\n")
    (proj / "Makefile").write_text(
        "SRCS := $(sort $(wildcard u*.c))\nN ?= 64\nOBJS := $(wordlist 1,$(N),$(SRCS:.c=.o))\n"
        "all: $(OBJS)\n%.o: %.c\n\t$(CC) -O2 -c $< -o $@\n"
    )
    rt = (ROOT / "scenarios/validate/forkjoin-block.json").read_text()
    if "rtapp_pload" not in ctx.cal:
        # rt-app's own calibration on CPU 0 (the hog is on CPU 1), once: every run then does
        # the same work.
        out = subprocess.run(["rt-app", str(ROOT / "scenarios/validate/forkjoin-block.json")], cwd=t,
                             capture_output=True, text=True, timeout=60, check=False)
        m = re.search(r"pLoad = (\d+)ns", out.stdout + out.stderr)
        if not m:
            sys.exit(f"rt-app printed no pLoad: {(out.stdout + out.stderr)[-400:]}")
        ctx.cal["rtapp_pload"] = int(m.group(1))
    # Without `duration` rt-app ends when its threads do (with it, it sleeps that long).
    rt = rt.replace('"calibration": "CPU0"', f'"calibration": {ctx.cal["rtapp_pload"]}').replace(', "duration": 30', "")
    (t / "forkjoin.json").write_text(rt)


def xz_input(ctx):
    n = int(ctx.cal.get("xz_bytes", 8 << 20))
    f = ctx.tmp / f"xz-{n}"
    if not f.exists():
        data = (ctx.tmp / "xz-base").read_bytes()
        while len(data) < n:
            data += data
        f.write_bytes(data[:n])
    return str(f)


def command(ctx, wl):
    """(argv, cwd) of one run of `wl` at the calibrated size."""
    c, w = ctx.cal, ctx.w
    if wl == "stress-ng":
        return ["stress-ng", "-q", "--matrix", "2", "--matrix-method", "prod", "--matrix-ops", str(c["stress_ops"])], None
    if wl == "stress-ng-short":
        ops = max(1, int(c["stress_ops"] * 0.3))
        return ["stress-ng", "-q", "--matrix", "2", "--matrix-method", "prod", "--matrix-ops", str(ops)], None
    if wl == "sysbench":
        return ["sysbench", "cpu", "--threads=2", f"--events={c['sysbench_events']}", "--time=0", "run"], None
    if wl == "xz":
        return ["sh", "-c", f"xz -T2 --block-size=1MiB -6 -c {xz_input(ctx)} > /dev/null"], None
    if wl == "make":
        for o in (ctx.tmp / "cproj").glob("*.o"):
            o.unlink()
        return ["make", "-s", "-j2", "-C", str(ctx.tmp / "cproj"), f"N={c['make_files']}"], None
    if wl == "numpy":
        code = (
            "import numpy as np; r = np.random.default_rng(1); a = r.random((1000, 1000)); "
            f"[a @ a for _ in range({c['numpy_iters']})]"
        )
        return [str(ctx.venv / "bin/python"), "-c", code], None
    if wl == "rtapp-forkjoin":
        return ["rt-app", str(ctx.tmp / "forkjoin.json")], str(ctx.tmp)
    u = c["units_per_ms"]
    if wl == "barrier-block":
        return [w, "barrier", "--threads", "2", "--phases", "50", "--phase-units", str(int(u * 20)), "--wait",
                "block", "--out", "/dev/null"], None
    if wl == "barrier-spin":
        return [w, "barrier", "--threads", "2", "--phases", "50", "--phase-units", str(int(u * 20)), "--wait",
                "spin", "--out", "/dev/null"], None
    if wl == "phased":
        return [w, "phased", "--threads", "2", "--phases", "40", "--phase-units", str(int(u * 25)), "--wait",
                "block", "--out", "/dev/null"], None
    raise ValueError(wl)


def run_fair2(ctx, config):
    """Two identical CPU-bound processes started together: wall, and each one's elapsed."""
    units = int(ctx.cal["units_per_ms"] * 1000)
    outs = [ctx.tmp / "f1.json", ctx.tmp / "f2.json"]
    for o in outs:
        o.unlink(missing_ok=True)
    spin = [[ctx.w, "spin", "--units", str(units), "--out", str(o)] for o in outs]
    if config == "linux":
        script = f"{' '.join(spin[0])} & {' '.join(spin[1])} & wait"
        wall = sh(["sh", "-c", script])
    else:
        cfg = ctx.tmp / "fair2.toml"
        cfg.write_text(
            'fast = "0"\n'
            + "".join(f'[[target]]\nname = "p{i}"\ncommand = {json.dumps(s)}\n' for i, s in enumerate(spin))
        )
        wall = sh([agent_bin(ctx, config), "agent", "--config", str(cfg), *placer_args(config), "--state", ctx.state])
    t = [json.loads(o.read_text())["elapsed_s"] for o in outs]
    return wall, {"t1": t[0], "t2": t[1], "gap": abs(t[0] - t[1]) / max(t)}


def run_one(ctx, wl, config):
    if wl == "fair2":
        return run_fair2(ctx, config)
    argv, cwd = command(ctx, wl)
    if ctx.job_cpu:
        # The job's CPU time: a shell runs it and prints its children's times (the same
        # wrapper under every configuration).
        argv = ["sh", "-c", '"$@"; times >&2', "sh", *argv]
    if config != "linux":
        argv = ctx.agent(config) + argv
    wall, err = sh(argv, cwd=cwd, env=ctx.env, want_err=True)
    return wall, run_extras(err)


def calibrate(ctx, wls):
    """Scale each workload's size so one default-Linux run takes about TARGET_S."""
    c = ctx.cal
    if "units_per_ms" not in c:
        p = ctx.tmp / "cal.json"
        subprocess.run(["taskset", "-c", "0", ctx.w, "spin", "--units", "20000", "--out", str(p)], check=True)
        c["units_per_ms"] = 20000 / json.loads(p.read_text())["run_s"] / 1e3
    knobs = {
        "stress-ng": ("stress_ops", 800, 1),
        "sysbench": ("sysbench_events", 2000, 1),
        "xz": ("xz_bytes", 8 << 20, 1 << 20),
        "make": ("make_files", 16, 2),
        "numpy": ("numpy_iters", 10, 1),
    }
    for wl, (key, start, least) in knobs.items():
        if key in c or wl not in wls:
            continue
        c[key] = start
        for _ in range(2):
            argv, cwd = command(ctx, wl)
            t = sh(argv, cwd=cwd, env=ctx.env)
            c[key] = max(least, int(c[key] * TARGET_S / max(t, 0.05)))
            if key == "make_files":
                c[key] = min(c[key], 64)
        print(f"calibrated {wl}: {key} = {c[key]}", flush=True)


def summary(rows, reps):
    by = {}
    for r in rows:
        by.setdefault((r["workload"], r["config"]), []).append(r)
    loads = [r["load1"] for r in rows]
    print(f"\n{len(rows)} runs; 1-minute load average during runs: median {statistics.median(loads):.1f}, "
          f"range {min(loads):.1f}-{max(loads):.1f}")
    seen = {k[1] for k in by}
    configs = [c for c in CONFIGS if c in seen] + sorted(c for c in seen if c not in CONFIGS)
    print("\n| workload | " + " | ".join(configs) + " |")
    print("|---|" + "---|" * len(configs))
    for wl in WORKLOADS:
        base = by.get((wl, "linux"))
        if not base:
            continue
        bm = statistics.median(r["wall_s"] for r in base)
        cells = []
        for c in configs:
            rs = by.get((wl, c), [])
            if not rs:
                cells.append("-")
                continue
            v = [r["wall_s"] for r in rs]
            m = statistics.median(v)
            cell = f"{m:.3f} s [{min(v):.3f}-{max(v):.3f}] n={len(v)}"
            if c != "linux":
                # The ratio of medians, then the median of per-repetition ratios (each run
                # against default Linux's run of the same repetition: drift cancels).
                lin = {r["rep"]: r["wall_s"] for r in base}
                per = [r["wall_s"] / lin[r["rep"]] for r in rs if r["rep"] in lin]
                cell = f"**{m / bm:.3f}** " + (f"({statistics.median(per):.3f}) " if per else "") + cell
            if wl == "fair2":
                cell += f" gap {100 * statistics.median(r['gap'] for r in rs):.0f} %"
            cells.append(cell)
        print(f"| {wl} | " + " | ".join(cells) + " |")
    extras = ("job_cpu_ms", "agent_cpu_ms", "class_flips", "changes")
    if any(k in r for r in rows for k in extras):
        print("\nPer run, medians (job CPU: user + system of the job's processes, --job-cpu; agent CPU, "
              "class flips and changes from the agent's --stats):")
        print("\n| workload | config | " + " | ".join(extras) + " |")
        print("|---|---|" + "---|" * len(extras))
        for wl in WORKLOADS:
            for c in configs:
                rs = by.get((wl, c), [])
                if not rs:
                    continue
                vals = []
                for k in extras:
                    v = [r[k] for r in rs if k in r]
                    vals.append(f"{statistics.median(v):g}" if v else "-")
                print(f"| {wl} | {c} | " + " | ".join(vals) + " |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--only", default=",".join(WORKLOADS))
    ap.add_argument("--configs", default=",".join(CONFIGS))
    ap.add_argument("--budget-s", type=float, default=540.0)
    ap.add_argument("--results", default=str(ROOT / "target/bench-agent-real.jsonl"))
    ap.add_argument("--venv", default=str(ROOT / "target/bench-venv"), help="a venv with numpy")
    ap.add_argument("--summary", action="store_true", help="only print the summary of the results file")
    ap.add_argument("--job-cpu", action="store_true",
                    help="also record each job's CPU time (a shell runs it and prints `times`)")
    args = ap.parse_args()
    wls = [w for w in args.only.split(",") if w]
    configs = [c for c in args.configs.split(",") if c]
    for w in wls:
        if w not in WORKLOADS:
            sys.exit(f"--only: unknown workload {w!r}; allowed: {', '.join(WORKLOADS)}")
    for c in configs:
        base, *opts = c.split(":")
        bad = [kv for kv in opts if kv.count("=") != 1 or kv.startswith("=")]
        if base not in CONFIGS or bad or (base == "linux" and opts):
            sys.exit(f"--configs: bad configuration {c!r}; allowed: {', '.join(CONFIGS)}, a placer may add "
                     f":K=V[:K=V] (period=MS for the agent's period, bin=PATH for another ampsched build, "
                     f"any other key a placer parameter)")
        for kv in opts:
            if kv.startswith("bin=") and not os.access(kv[4:], os.X_OK):
                sys.exit(f"--configs: {c!r}: {kv[4:]} is not an executable file")
    res = Path(args.results)
    rows = [json.loads(x) for x in res.read_text().splitlines() if x.strip()] if res.exists() else []
    if args.summary:
        summary(rows, args.reps)
        return
    if "numpy" in wls and not (Path(args.venv) / "bin/python").exists():
        sys.exit(f"numpy: no venv at {args.venv}: python3 -m venv {args.venv} && {args.venv}/bin/pip install numpy")
    done = {(r["workload"], r["config"], r["rep"]) for r in rows}
    tmp = Path(tempfile.mkdtemp(prefix="ampsched-bench-real-"))
    ctx = Ctx(args, tmp)
    calf = Path(str(res) + ".cal.json")
    if calf.exists():
        ctx.cal = json.loads(calf.read_text())
    hog = subprocess.Popen([ctx.hog, "--cpu", "1", "--spin-ms", "5", "--sleep-ms", "5", "--secs",
                            str(int(args.budget_s) + 120)], stdout=subprocess.DEVNULL)
    t0 = time.monotonic()
    try:
        time.sleep(0.3)
        if hog.poll() is not None:
            sys.exit("the hog did not start (root needed for SCHED_FIFO)")
        prepare(ctx)
        calibrate(ctx, wls)
        calf.parent.mkdir(parents=True, exist_ok=True)
        calf.write_text(json.dumps(ctx.cal, indent=1))
        print(f"hog pid {hog.pid} on CPU 1; calibration {ctx.cal}; load {load1()}", flush=True)
        with res.open("a") as out:
            for rep in range(args.reps):
                order = configs[rep % len(configs):] + configs[: rep % len(configs)]
                for wl in wls:
                    for config in order:
                        if (wl, config, rep) in done:
                            continue
                        if time.monotonic() - t0 > args.budget_s:
                            print("budget spent; run again to continue", flush=True)
                            return
                        l0 = load1()
                        wall, extra = run_one(ctx, wl, config)
                        row = {"workload": wl, "config": config, "rep": rep, "wall_s": round(wall, 5),
                               "load1": l0, **extra, "cal": {k: ctx.cal.get(k) for k in sorted(ctx.cal)}}
                        out.write(json.dumps(row) + "\n")
                        out.flush()
                        rows.append(row)
                        print(f"{wl:16} {config:11} rep {rep} {wall:.3f} s load {l0}", flush=True)
        summary(rows, args.reps)
    finally:
        hog.kill()
        hog.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
