#!/usr/bin/env bash
# Fuzz one of ampsched's parsers with libFuzzer (cargo-fuzz, nightly Rust).
#   fuzz/run.sh TARGET SECONDS [extra libFuzzer flags]
#   TARGET: scenario | rtapp | agent_config | qmp_reply | all
# The corpus starts from the repository's own files (scenarios, rt-app JSON,
# the agent examples, fuzz/seeds) and grows in fuzz/corpus/TARGET (not
# committed). A crash is saved in fuzz/artifacts/TARGET and makes this exit
# non-zero. CI runs each target for a short smoke; long runs (10 M
# executions per target) are a command, see docs/security.md.
set -euo pipefail
cd "$(dirname "$0")"
self="$(pwd)/run.sh"
target=${1:?usage: fuzz/run.sh TARGET SECONDS}
secs=${2:?usage: fuzz/run.sh TARGET SECONDS}
shift 2
if [ "$target" = all ]; then
  for t in scenario rtapp agent_config qmp_reply; do "$self" "$t" "$secs" "$@"; done
  exit 0
fi
repo=..
corpus=corpus/$target
mkdir -p "$corpus"
case $target in
  scenario) find "$repo/scenarios" "$repo/examples" -name '*.toml' -exec cp -n {} "$corpus/" \; ;;
  rtapp) find "$repo/scenarios" "$repo/examples" -name '*.json' -exec cp -n {} "$corpus/" \; ;;
  agent_config) find "$repo/examples/agent" -name '*.toml' -exec cp -n {} "$corpus/" \; ;;
  qmp_reply) cp -n seeds/qmp_reply/* "$corpus/" ;;
  *) echo "unknown target $target (scenario, rtapp, agent_config, qmp_reply, all)" >&2; exit 2 ;;
esac
# rt-app files in the wild reach hundreds of KiB: let inputs grow to 1 MiB there.
max_len=65536
[ "$target" = rtapp ] && max_len=1048576
# AMPSCHED_FUZZ_FLAGS: extra cargo-fuzz flags, e.g. "-s none -a" for long runs
# (no sanitizer: several times the executions per second on safe Rust; debug
# assertions and overflow checks kept).
# shellcheck disable=SC2086
cargo +nightly fuzz run ${AMPSCHED_FUZZ_FLAGS:-} "$target" "$corpus" -- -max_total_time="$secs" -max_len="$max_len" \
  -print_final_stats=1 "$@"
