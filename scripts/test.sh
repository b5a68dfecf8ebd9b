#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite on the real engines.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
set +e
.venv/bin/python -m pytest -q -ra "$@"
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
  echo "pytest collected no tests (exit 5): nothing was checked; treating the selection as empty, not as a failure" >&2
  exit 0
fi
exit "$rc"
