#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite on the real engines.
set -euo pipefail
cd "$(dirname "$0")/.."
passed=.fast-tier-passed
rm -f "$passed"
if [ $# -eq 0 ]; then
  # The fast tier first, in its own venv with no engine and before set-up builds any model (scripts/test_fast.sh), so
  # that it cannot come to lean on either. The tests it passed are not run again below (tests/conftest.py).
  echo "== the fast tier (no engine installed)" >&2
  OFFLINE_EVAL_RECORD_PASSED="$PWD/$passed" bash scripts/test_fast.sh
fi
bash scripts/setup.sh
# The report test opens report.html in Debian's headless Chromium.
if ! command -v chromium >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "== installing Debian's chromium for the report test" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } ||
    echo "could not install chromium: the report-in-a-browser test will be skipped" >&2
fi
bash scripts/lint.sh
OFFLINE_EVAL_SKIP_PASSED="$PWD/$passed" exec bash scripts/run_pytest.sh .venv -q -ra --durations=30 "$@"
