#!/usr/bin/env bash
# ruff (lint and format), mypy and import-linter (the layers, no import circles) over the package, configured in
# pyproject.toml; `make test` runs this first.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
"$VENV/bin/ruff" check offline_eval scripts tests
"$VENV/bin/ruff" format --check offline_eval scripts tests
"$VENV/bin/mypy"
"$VENV/bin/lint-imports" --no-cache
