# The two set-up commands in the README. Both create .venv/ and the tiny models first.
.PHONY: demo test test-fast test-bench lint setup models bench

demo: setup                     ## install everything and run the sample sweep: Gemma 3 270M and the tiny models
	.venv/bin/offline-eval sweep demo.yaml
	@echo "report: runs/demo/report.md"

test:                           ## install everything and run the tests
	bash scripts/test.sh

test-fast:                      ## our own logic only, on the fake engine: no engine installed, about 5 minutes
	bash scripts/test_fast.sh

test-bench: setup               ## the benchmark and rehearsal scripts that start engines of their own, quick modes
	bash scripts/run_pytest.sh .venv -q -m bench

lint:                           ## ruff and mypy, as `make test` runs them
	bash scripts/lint.sh

setup:
	bash scripts/setup.sh

bench: setup
	.venv/bin/python scripts/bench_overhead.py
