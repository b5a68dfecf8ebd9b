#!/usr/bin/env bash
# The fast tier: every test that starts no real engine, in .venv-fast/ (the base package and the test tools
# only, so nothing here can lean on an engine being installed).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
# --install-only: make the venv and stop; --installed: run the tests in the venv as it is (scripts/test.sh runs them
# beside the set-up, whose own install of this folder must not race this one's).
mode=${1:-}
case "$mode" in --install-only | --installed) shift ;; esac
if [ "$mode" != --installed ]; then
  if [ ! -x .venv-fast/bin/python ]; then
    "$PY" -m venv .venv-fast
    .venv-fast/bin/python -m pip install -q -U pip
  fi
  .venv-fast/bin/python -m pip install -q -e ".[test]"
  .venv-fast/bin/python -m offline_eval.runtime.i18n
fi
[ "$mode" != --install-only ] || exit 0
exec bash scripts/run_pytest.sh .venv-fast -q -m "not engine and not slow" -p no:cacheprovider "$@"
