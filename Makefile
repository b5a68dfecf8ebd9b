# The two set-up commands in the README. Both create .venv/ and the tiny models first.
.PHONY: demo test setup models bench

demo: setup                     ## install everything and run the sample sweep on the tiny local models
	.venv/bin/offline-eval sweep models.yaml
	@echo "report: runs/demo/report.md"

test:                           ## install everything and run the tests
	bash scripts/test.sh

setup:
	bash scripts/setup.sh

bench: setup
	.venv/bin/python scripts/bench_overhead.py
