# Shared set-up of the real-machine benchmarks scripts/bench-agent.sh and
# scripts/bench-agent-figures.sh (sourced, from the repository root): a
# release build, the SCHED_FIFO duty-cycle hog on CPU 1 (5 ms spin / 5 ms
# sleep), and a cleanup that kills the hog and removes the scratch directory
# on every exit path. Sets A (ampsched), W (ampsched-workload), H (the hog),
# TMP and HOG; defines load (prints the load average).
# BENCH_AGENT_PREBUILT=1 uses the release binaries as they are: inside quiet windows
# (a wrapper that SIGSTOPs the machine's other builds, cargo among them), a build can wait forever for the package-cache
# lock a stopped cargo holds.
TARGET="${CARGO_TARGET_DIR:-$PWD/target}"
if [ "${BENCH_AGENT_PREBUILT:-0}" = 1 ]; then
  echo "== release binaries as built (BENCH_AGENT_PREBUILT=1)"
else
  echo "== building (release)"
  cargo build -q --release -p ampsched-cli -p ampsched-agent
fi
A="$TARGET/release/ampsched"; W="$TARGET/release/ampsched-workload"; H="$TARGET/release/ampsched-hog"
TMP="$(mktemp -d)"
HOG=""
cleanup() {
  if [ -n "$HOG" ]; then kill -KILL "$HOG" 2>/dev/null || true; wait "$HOG" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
load() { echo "    (load average: $(cut -d' ' -f1-3 /proc/loadavg))"; }
"$H" --cpu 1 --spin-ms 5 --sleep-ms 5 --secs 1800 >/dev/null &
HOG=$!
sleep 0.3
kill -0 "$HOG" || { echo "the hog did not start (root needed)"; exit 1; }
echo "hog pid $HOG on CPU 1 (SCHED_FIFO, 5 ms spin / 5 ms sleep); machine load: $(cut -d' ' -f1-3 /proc/loadavg)"
