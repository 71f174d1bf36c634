# Sourced by scripts/test.sh and .ci/run: the Python the tests use is a venv
# of the project's own (target/venv, or $AMPSCHED_VENV), never whatever Python
# is active. Sets PY; with AMPSCHED_SKIP_INSTALL=1 the venv is used as it is.
AMPSCHED_VENV="${AMPSCHED_VENV:-$PWD/target/venv}"
PY="$AMPSCHED_VENV/bin/python"
if [ "${AMPSCHED_SKIP_INSTALL:-0}" != 1 ]; then
  if [ ! -x "$PY" ]; then
    echo "== python3 -m venv $AMPSCHED_VENV"
    if ! python3 -m venv "$AMPSCHED_VENV"; then
      echo "python3 -m venv failed: install the venv module (apt-get install python3-venv)" >&2
      exit 1
    fi
  fi
  echo "== pip install .[test] into $AMPSCHED_VENV (builds the extension: a few minutes the first time)"
  "$PY" -m pip install -q --disable-pip-version-check ".[test]"
fi
