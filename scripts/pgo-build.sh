#!/usr/bin/env bash
# Opt-in profile-guided build of the `ampsched` binary (issue 19, simulator
# speed). Not the README's install: `cargo install --path crates/ampsched-cli`
# stays the supported build; this script builds a second binary whose code
# layout and inlining follow what the simulator's benchmark actually runs.
#
# Steps (rustc's profile-guided optimisation, "The rustc book", chapter
# "Profile-guided Optimization"):
#   1. an instrumented release build (-Cprofile-generate) in target/pgo-gen;
#   2. a training run: `ampsched bench` (the S, M, L and XL cases) and
#      `ampsched reproduce study` (small machines, the `fair` dispatcher,
#      bursty noise), which write raw profiles into target/pgo-data;
#   3. llvm-profdata (rustup's llvm-tools component, added if missing) merges
#      them;
#   4. the optimised build (-Cprofile-use) in target/pgo-use.
# The result is target/pgo-use/release/ampsched. Outputs are the same as the
# plain build's (PGO changes code layout and inlining, not arithmetic).
# Measured figures: crates/ampsched-sim/src/bench.rs, module essay.
# Time: two release builds and about a minute of training (2 cores: ~10 min).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
data=$root/target/pgo-data
sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata=$sysroot/lib/rustlib/$host/bin/llvm-profdata
if [ ! -x "$profdata" ]; then
  rustup component add llvm-tools-preview
fi
rm -rf "$data"
mkdir -p "$data"
echo "== instrumented build (target/pgo-gen)"
RUSTFLAGS="-Cprofile-generate=$data" CARGO_TARGET_DIR=$root/target/pgo-gen \
  cargo build --release -p ampsched-cli
gen=$root/target/pgo-gen/release/ampsched
echo "== training run"
"$gen" bench --case S --case M --case L --case XL
"$gen" reproduce study --out "$root/target/pgo-train/study" >/dev/null
echo "== merging profiles"
"$profdata" merge -o "$data/merged.profdata" "$data"/*.profraw
echo "== optimised build (target/pgo-use)"
RUSTFLAGS="-Cprofile-use=$data/merged.profdata" CARGO_TARGET_DIR=$root/target/pgo-use \
  cargo build --release -p ampsched-cli
echo "built target/pgo-use/release/ampsched"
