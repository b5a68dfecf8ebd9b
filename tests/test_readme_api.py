"""The Python API's example (docs/python-api.md) runs as written, from the repository root, on the tiny GGUF
(llama.cpp)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.engine


def test_the_readme_python_example_runs(tiny):  # type: ignore[no-untyped-def]
    page = (ROOT / "docs" / "python-api.md").read_text(encoding="utf-8")
    code = re.search(r"```python\n(.*?)```", page, re.DOTALL)
    assert code is not None
    out = ROOT / "runs" / "api-example"
    shutil.rmtree(out, ignore_errors=True)
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code.group(1)], cwd=ROOT, capture_output=True, text=True, timeout=600
        )
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.split("\n")
        assert lines[0].startswith("tiny.llamacpp.default.ctx2048 ") and len(lines[1]) == 64
        assert lines[2].endswith(" of 8 correct") and "tiny.llamacpp.default.ctx2048    8" in proc.stdout
        assert subprocess.run([sys.executable, "-m", "offline_eval.cli", "verify", str(out)], cwd=ROOT).returncode == 0
    finally:
        shutil.rmtree(out, ignore_errors=True)
