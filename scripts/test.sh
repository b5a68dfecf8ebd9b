#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite on the real engines.
set -euo pipefail
cd "$(dirname "$0")/.."
passed=.fast-tier-passed
rm -f "$passed"
fast=
if [ $# -eq 0 ]; then
  # The fast tier in its own venv with no engine (scripts/test_fast.sh), so that it cannot come to lean on one: its
  # venv is made first, then its tests run beside the set-up (the models it builds are no fast test's), and the
  # tests it passed are not run again below (tests/conftest.py).
  echo "== the fast tier (no engine installed), beside the set-up; its output follows the set-up's" >&2
  bash scripts/test_fast.sh --install-only
  OFFLINE_EVAL_RECORD_PASSED="$PWD/$passed" bash scripts/test_fast.sh --installed >.fast-tier.log 2>&1 &
  fast=$!
fi
bash scripts/setup.sh
# The report test opens report.html in Debian's headless Chromium.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing Debian's chromium for the report test" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } ||
    echo "could not install chromium: the report-in-a-browser test will be skipped" >&2
fi
if [ -n "$fast" ]; then
  rc=0
  wait "$fast" || rc=$?
  echo "== the fast tier's output" >&2
  cat .fast-tier.log
  [ "$rc" -eq 0 ] || { echo "the fast tier failed (exit $rc)" >&2; exit "$rc"; }
fi
bash scripts/lint.sh
OFFLINE_EVAL_SKIP_PASSED="$PWD/$passed" exec bash scripts/run_pytest.sh .venv -q -ra --durations=30 -m "not bench" "$@"
