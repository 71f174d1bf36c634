#!/usr/bin/env bash
# The amounts the real-machine tests no longer assert (they depend on the
# machine's load; the tests check structure only), measured and printed. A
# benchmark, not a test: it prints figures and the load average, and fails
# only when something cannot run. Needs root (the SCHED_FIFO hog) and 2+ CPUs.
#
#   scripts/bench-agent-figures.sh [RUNS]     (default 5)
#
# (1) fair sharing (tests/linux.rs fair_sharing_two_cpu_bound_processes_split_the_fast_cpu):
#     two single-thread spinners for 3 s under `ampsched agent` (aash, CPU 0 fast, hog on
#     CPU 1): their CPU-0 run time together (≈ 3 s on an idle machine) and p1's share of it
#     (AASH's promise: 0.5);
# (2) fast share (tests/linux.rs the_agent_records_its_decisions_as_a_perfetto_trace): three
#     spinners for 1.5 s under `ampsched run`: the run time they got on CPU 0 per second of
#     wall time (the trace's mean `fast share`; ≈ 1 on an idle machine);
# (4) sequential phases (tests/linux.rs sequential_phases_the_lone_active_thread_runs_on_the_fast_cpu):
#     the share of the working thread's run time on CPU 0 (≈ 0.99 quiet);
# (3) task clock against schedstat (src/runclock.rs
#     counts_the_run_time_of_another_thread_like_schedstat): a 50 ms spin seen by the
#     perf task clock and by /proc schedstat; they differ by a few µs per preemption
#     (the perf clock's run intervals open and close a little apart from the scheduler's),
#     so the difference grows with the machine's load.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS="${1:-5}"
. scripts/bench-agent-common.sh   # build, hog on CPU 1, cleanup, load
j() { python3 -c "import json,sys; v=json.load(open(sys.argv[1])); print($2)" "$1"; }
stats() { python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print(f'median {statistics.median(v):.3f} (min {min(v):.3f}, max {max(v):.3f})')" "$@"; }

load
echo "(1) fair sharing: two spinners, 3 s, aash, CPU 0 fast"
pair=(); share=()
for i in $(seq "$RUNS"); do
  cat > "$TMP/c.toml" <<CFG
fast = "0"
[placer]
name = "aash"
[[target]]
name = "p1"
command = ["$W", "spin", "--secs", "3", "--out", "$TMP/p1.json"]
[[target]]
name = "p2"
command = ["$W", "spin", "--secs", "3", "--out", "$TMP/p2.json"]
CFG
  "$A" agent --config "$TMP/c.toml" --state "$TMP/state.json"
  a0=$(j "$TMP/p1.json" "v['on_cpu_s'][0]"); b0=$(j "$TMP/p2.json" "v['on_cpu_s'][0]")
  pair+=("$(python3 -c "print($a0 + $b0)")"); share+=("$(python3 -c "print($a0 / max($a0 + $b0, 1e-9))")")
done
echo "    CPU-0 run time of the pair, s: $(stats "${pair[@]}")"
echo "    p1's share of it:             $(stats "${share[@]}")"
load

echo "(2) fast share: three spinners, 1.5 s, ampsched run (aash, CPU 0 fast)"
fs=()
for i in $(seq "$RUNS"); do
  "$A" run --placer aash --fast 0 --state "$TMP/state.json" -- "$W" spin --threads 3 --secs 1.5 --out "$TMP/s.json"
  fs+=("$(j "$TMP/s.json" "v['on_cpu_s'][0] / v['elapsed_s']")")
done
echo "    CPU-0 run time per wall second: $(stats "${fs[@]}")"
load

echo "(4) sequential phases (3 threads, one works at a time, 12 x 250 ms): work done on CPU 0"
ph=()
for i in $(seq "$RUNS"); do
  "$A" run --placer aash --fast 0 --state "$TMP/state.json" -- "$W" phased --threads 3 --phases 12 --phase-ms 250 --out "$TMP/ph.json"
  ph+=("$(j "$TMP/ph.json" "v['on_cpu_s'][0] / v['run_s']")")
done
echo "    share of run time on CPU 0: $(stats "${ph[@]}")"
load

echo "(3) task clock against schedstat over a 50 ms spin"
cargo test -q --release -p ampsched-agent --lib --no-run 2>/dev/null
T=$(ls -t "$TARGET"/release/deps/ampsched_agent-* | grep -v '\.d$' | head -1)
diff=()
for i in $(seq "$RUNS"); do
  line=$("$T" runclock::tests::counts_the_run_time_of_another_thread_like_schedstat --exact --nocapture 2>&1 | grep '^spin ' || true)
  [ -n "$line" ] || { echo "    no figure (perf events unavailable?)"; break; }
  diff+=("$(python3 -c "import re,sys; s,c,d=map(int,re.findall(r'(\d+) ns',sys.argv[1])); print((c-d)/1e3)" "$line")")
done
[ "${#diff[@]}" -eq 0 ] || echo "    task clock − schedstat, µs: $(stats "${diff[@]}")"
load
