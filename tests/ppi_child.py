"""ppi_py, the reference for the calibration tests, run in a child process.

ppi_py imports numba, and numba's llvmlite.binding in a process crashes every later vLLM start there (vLLM's CPU
kernel rebinding scans sys.modules and trips on llvmlite's lazy library object)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pytest

PPI_PY = """
import json, sys
import numpy as np
import ppi_py
from ppi_py.ppi import _calc_lam_glm
out = []
for y, yhat, u in json.load(sys.stdin):
    y, yhat, u = (np.array(v, dtype=float) for v in (y, yhat, u))
    row = {"lam": float(_calc_lam_glm(y[:, None], yhat[:, None], u[:, None], np.eye(1), clip=True))}
    for key, lam in (("pp", None), ("one", 1), ("zero", 0)):
        lo, hi = ppi_py.ppi_mean_ci(y, yhat, u, alpha=0.05, lam=lam)
        point = ppi_py.ppi_mean_pointestimate(y, yhat, u, lam=lam)
        row[key] = [float(point[0]), float(lo[0]), float(hi[0])]
    out.append(row)
json.dump(out, sys.stdout)
"""


def ppi_py_reference(cases: list[tuple[object, object, object]]) -> list[dict[str, object]]:
    if importlib.util.find_spec("ppi_py") is None:  # its presence only: importorskip would import it here
        pytest.skip("ppi_py is not installed")
    payload = json.dumps([[np.asarray(v, dtype=float).tolist() for v in case] for case in cases])
    done = subprocess.run(
        [sys.executable, "-c", PPI_PY], input=payload, capture_output=True, text=True, check=False, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rows: list[dict[str, object]] = json.loads(done.stdout)
    return rows
