#!/usr/bin/env bash
# The whole test suite (the README's test command): the Rust workspace's tests
# (simulator, policies, agent on this real machine), then the Python package's
# tests, with a freshly reproduced AASH report checked in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== cargo test --workspace"
cargo test --workspace
if [ "${AMPSCHED_SKIP_INSTALL:-0}" != 1 ]; then
  echo "== pip install .[test]"
  python3 -m pip install -q --disable-pip-version-check ".[test]"
fi
if [ -z "${AMPSCHED_REPORT:-}" ]; then
  report_dir="$(mktemp -d)"
  echo "== ampsched reproduce aash --out $report_dir/aash (for the browser test)"
  cargo run -q --release -p ampsched-cli -- reproduce aash --out "$report_dir/aash" >/dev/null
  export AMPSCHED_REPORT="$report_dir/aash/report.html"
fi
echo "== pytest python/tests"
python3 -m pytest -q python/tests
