"""Sweeps over quantization and context length: the exact dry-run plan, ablation families and pairing,
failures that do not stop the sweep, engines that free their memory, quantize, and the offline report."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from conftest import DATA, EAGER, TINY, metric, run_cli


def gguf_config(
    tmp: Path, variants: dict, contexts: list[int], modes=("constrained",), shots=(0, 4), limit: int | None = 10
) -> Path:
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "tg",
                "backend": "llamacpp",
                "path": str(TINY / "gguf" / "tiny-f16.gguf"),
                "max_model_len": contexts,
                "variants": variants,
            }
        ],
        "tasks": {
            "jbeqa": {
                "protocol": "offline-eval",
                "data": str(DATA),
                "shots": list(shots),
                "mode": list(modes),
                **({"limit": limit} if limit else {}),
            }
        },
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return p


VARIANTS = {q: {"file": str(TINY / "gguf" / f"tiny-{q}.gguf")} for q in ("f16", "q8_0", "q4_0")}


def test_dry_run_plan_is_exact(tmp_path, tiny):
    # 0-shot prompts fit in 320 tokens, 4-shot prompts do not; both fit in 2048.
    cfg = gguf_config(tmp_path, VARIANTS, [320, 2048], modes=("constrained", "free"))
    dry = run_cli("sweep", str(cfg), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert not (tmp_path / "out").exists()
    loads = re.findall(r"\[(\d+)/(\d+)\] load (\S+)", dry.stderr)
    assert [x[2] for x in loads] == [f"tg.llamacpp.{q}.ctx{c}" for q in VARIANTS for c in (320, 2048)]
    planned = {}
    run = None
    for line in dry.stderr.splitlines():
        m = re.match(r"\[\d+/\d+\] load (\S+)", line)
        if m:
            run = m.group(1)
        m = re.match(
            r"\s+(jbeqa\.\S+): (\d+) requests, (\d+) prompt tokens, <= (\d+) output tokens, (\d+) overflow", line
        )
        if m:
            planned[(run, m.group(1))] = tuple(int(x) for x in m.groups()[1:])
    assert len(planned) == 6 * 4
    assert planned[("tg.llamacpp.f16.ctx320", "jbeqa.4shot.constrained")][3] == 10  # all overflow
    assert planned[("tg.llamacpp.f16.ctx320", "jbeqa.0shot.constrained")][3] == 0
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0, proc.stderr
    runs = json.loads((tmp_path / "out" / "summary.json").read_text())["runs"]
    for r in runs:
        n, prompt, out_max, over = planned[(r["run"], r["setting"])]
        recs = [
            json.loads(x)
            for x in (tmp_path / "out" / "results" / r["run"] / f"{r['setting']}.jsonl").read_text().splitlines()
        ]
        assert n == len(recs) and over == metric(r, "n_skipped")
        # Planned prompt tokens are those of the prompts that fit; the engine reports the same counts.
        assert prompt == sum(x.get("prompt_tokens", 0) for x in recs if not x["skipped"])
        # llama-cpp-python may take one token more to finish a UTF-8 character (see test_engines).
        scored = [x for x in recs if not x["skipped"]]
        assert out_max + len(scored) >= sum(x.get("output_tokens", 0) for x in scored)


def test_ablation_families_and_pairing(tmp_path, tiny):
    cfg = gguf_config(tmp_path, VARIANTS, [1024, 2048], modes=("logprob",), shots=(0,), limit=None)
    assert run_cli("sweep", str(cfg)).returncode == 0
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    fams = {f["family"]: f for f in s["ablations"]}
    assert set(fams) == {
        "tg (llamacpp), jbeqa.0shot.logprob, ctx 1024: variants",
        "tg (llamacpp), jbeqa.0shot.logprob, ctx 2048: variants",
        "tg (llamacpp), jbeqa.0shot.logprob, f16: context lengths",
        "tg (llamacpp), jbeqa.0shot.logprob, q8_0: context lengths",
        "tg (llamacpp), jbeqa.0shot.logprob, q4_0: context lengths",
    }
    quant = fams["tg (llamacpp), jbeqa.0shot.logprob, ctx 1024: variants"]
    assert quant["n_items"] == 26 and len(quant["comparisons"]) == 3
    assert sorted(c["comparison"] for c in quant["comparisons"]) == ["f16 vs q4_0", "f16 vs q8_0", "q4_0 vs q8_0"]
    # Recompute one comparison by hand from the per-item files: pairing by id.
    from offline_eval.metrics.stats import paired_test

    def items(run):  # type: ignore[no-untyped-def]
        f = tmp_path / "out" / "results" / run / "jbeqa.0shot.logprob.jsonl"
        return {json.loads(x)["id"]: json.loads(x)["scores"]["correct"] for x in f.read_text().splitlines()}

    a, b = items("tg.llamacpp.f16.ctx1024"), items("tg.llamacpp.q4_0.ctx1024")
    ids = sorted(a)
    ref = paired_test([a[i] for i in ids], [b[i] for i in ids], n_resamples=1000)
    c = next(c for c in quant["comparisons"] if c["comparison"] == "f16 vs q4_0")
    # Right/wrong per item on both sides: McNemar's exact test, the cluster bootstrap's p beside it.
    assert c["test"] == ref.test == "mcnemar" and c["p"] == ref.p and c["hl"] == ref.hl
    assert c["bootstrap_p"] == ref.bootstrap_p and c["discordant"] == ref.discordant
    assert c["p_bonf"] == min(1.0, 3 * c["p"])
    # Non-inferiority on a real engine: every run against f16 at the longest context, recomputed from the files.
    (verdicts,) = s["noninferiority"]
    assert verdicts["reference"] == "tg.llamacpp.f16.ctx2048" and len(verdicts["comparisons"]) == 5
    ref_items = items("tg.llamacpp.f16.ctx2048")
    for v in verdicts["comparisons"]:
        mine = items(v["run"])
        assert v["n"] == 26 and v["estimate"] == pytest.approx(sum(mine[i] - ref_items[i] for i in ids) / 26)
        lo, hi, m = v["ci_low"], v["ci_high"], v["margin"]
        assert v["verdict"] == ("non-inferior" if lo > -m else "inferior" if hi < -m else "inconclusive")
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Verdicts: tg (llamacpp)" in report
    assert "Ablation: tg (llamacpp), jbeqa.0shot.logprob, ctx 1024: variants" in report
    assert "| comparison | statistic | raw p | pBonf | pHolm | qBH | cluster-bootstrap p | HL [95% CI] |" in report
    plots = sorted(p.name for p in (tmp_path / "out" / "plots").iterdir())
    assert "context_f1.png" in plots and "pareto.png" in plots and any(p.startswith("quant_") for p in plots)
    assert any(p.startswith("frontier_") for p in plots) and any(p.startswith("subjects_") for p in plots)


def test_a_failing_variant_does_not_stop_the_sweep(tmp_path, tiny):
    variants = {"q8_0": VARIANTS["q8_0"], "gone": {"file": str(tmp_path / "missing.gguf")}, "q4_0": VARIANTS["q4_0"]}
    proc = run_cli("sweep", str(gguf_config(tmp_path, variants, [1024], shots=(0,), limit=4)))
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1].startswith("offline-eval: error: tg.llamacpp.gone.ctx1024: ")
    s = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [f["run"] for f in s["failures"]] == ["tg.llamacpp.gone.ctx1024"]
    assert "path does not exist" in s["failures"][0]["reason"]
    assert sorted(r["variant"] for r in s["runs"]) == ["q4_0", "q8_0"]
    assert "Failed runs" in (tmp_path / "out" / "report.md").read_text()


def test_engines_release_memory_between_loads(tiny):
    """A closed engine's memory comes back: the KV cache of a large llama.cpp context, and vLLM's reserved KV cache
    and weights."""
    import gc

    import psutil

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.backends.spec import LoadSpec
    from offline_eval.runtime.memory import tree_rss

    gc.collect()
    base = tree_rss()
    b = load_backend(
        LoadSpec(
            name="t",
            backend="llamacpp",
            path=str(TINY / "gguf" / "tiny-f16.gguf"),
            max_model_len=131072,
            engine_args={"type_k": 1, "type_v": 1},
        )
    )
    b.llm.eval([1, 5, 17])  # touch the cache
    loaded = tree_rss()
    b.close()
    del b
    gc.collect()
    freed = tree_rss()
    assert loaded - base > 30 * 2**20, (base, loaded)  # 2 layers x 128k x 64 x 2 (k, v) x 2 bytes = 64 MiB
    assert freed - base < (loaded - base) / 2, (base, loaded, freed)

    def engine_processes() -> list[psutil.Process]:
        # multiprocessing's resource tracker (13 MB) lives as long as the interpreter; it is not the engine.
        return [p for p in psutil.Process().children(recursive=True) if "resource_tracker" not in " ".join(p.cmdline())]

    # On CPU vLLM's engine core runs in this process: what a load holds (its reserved KV cache, the weights) comes
    # back on close, and no engine process is left behind.
    already = {p.pid for p in engine_processes()}  # e.g. a session-wide engine of another test module
    spec = LoadSpec(name="t", backend="vllm", path=str(TINY / "hf"), max_model_len=1024, engine_options=EAGER)
    first = load_backend(spec)  # torch and vLLM imported, the model traced: those stay for the process's life
    first.close()
    del first
    gc.collect()
    base = tree_rss()
    v = load_backend(spec)
    loaded = tree_rss()
    v.close()
    del v
    gc.collect()
    freed = tree_rss()
    assert loaded - base > 200 * 2**20, (base, loaded)
    assert freed - base < (loaded - base) / 2, (base, loaded, freed)
    assert {p.pid for p in engine_processes()} <= already


def test_quantize_command(tmp_path, tiny):
    proc = run_cli("quantize", str(TINY / "gguf" / "tiny-f16.gguf"), "--to", "q8_0,q4_k_m", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-q4_k_m.gguf", "tiny-q8_0.gguf"]
    from llama_cpp import Llama

    llm = Llama(model_path=str(tmp_path / "tiny-q4_k_m.gguf"), verbose=False, n_ctx=128)
    assert llm.metadata["general.file_type"] == "15"  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    llm.close()
    bad = run_cli("quantize", str(TINY / "gguf" / "tiny-f16.gguf"), "--to", "q9")
    assert bad.returncode == 2 and "unknown type(s) q9" in bad.stderr


def test_report_html_is_self_contained(tmp_path, tiny):
    cfg = gguf_config(tmp_path, {"q8_0": VARIANTS["q8_0"], "q4_0": VARIANTS["q4_0"]}, [1024], shots=(0,), limit=6)
    assert run_cli("sweep", str(cfg)).returncode == 0
    html = (tmp_path / "out" / "report.html").read_text()
    assert "data:image/png;base64," in html
    assert not re.search(r'(src|href)="(?!data:|#)', html)  # no external assets (in-page links are fine)


def test_report_renders_in_headless_chromium(tmp_path, tiny, offline_browser):  # type: ignore[no-untyped-def]
    """report.html opens offline in a real browser: it renders, every image loads, no console errors."""
    cfg = gguf_config(tmp_path, {"q8_0": VARIANTS["q8_0"], "q4_0": VARIANTS["q4_0"]}, [512, 1024], shots=(0,), limit=6)
    assert run_cli("sweep", str(cfg)).returncode == 0
    report = tmp_path / "out" / "report.html"
    errors: list[str] = []
    page = offline_browser.new_page()
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(report.as_uri())
    page.wait_for_load_state("load")
    images = page.eval_on_selector_all("img", "els => els.map(e => [e.complete, e.naturalWidth])")
    title = page.title()
    tables = page.eval_on_selector_all("table", "els => els.length")
    assert title == "offline-eval report" and tables >= 3
    assert len(images) >= 4 and all(done and width > 0 for done, width in images), images
    assert errors == []
