#!/usr/bin/env bash
# Regenerate crates/ampsched-perfetto/src/protos.rs (checked in) from the
# vendored Perfetto proto subset with prost-build. Needs protoc
# (`apt-get install protobuf-compiler`); normal builds need neither.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v protoc >/dev/null || { echo "protoc not found: apt-get install protobuf-compiler" >&2; exit 1; }
CARGO_TARGET_DIR="$PWD/target/perfetto-gen" cargo run -q --manifest-path tools/perfetto-gen/Cargo.toml -- "$PWD"
cargo fmt -p ampsched-perfetto
