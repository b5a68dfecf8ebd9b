"""Reliability: results that must never be silently wrong, work that must never be lost, and inputs that must
be refused in one line (issue: reliability). Each test failed on the code before its fix."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import CLI, DATA, ROOT, TINY, run_cli, typed
from test_bad_input import assert_one_line_error, write_config


def strict_json(path: Path) -> object:
    """json.loads that refuses NaN/Infinity, as strict parsers (and the JSON spec) do."""

    def refuse(name: str) -> None:
        raise ValueError(f"{path}: bare {name} is not JSON")

    return json.loads(path.read_text(encoding="utf-8"), parse_constant=refuse)


def _edit(cfg: Path, fn) -> None:  # type: ignore[no-untyped-def]
    raw = yaml.safe_load(cfg.read_text(encoding="utf-8"))
    fn(raw)
    cfg.write_text(yaml.safe_dump(raw, allow_unicode=True), encoding="utf-8")


# ---- 2. the store key identifies the weights, whole


def test_fingerprint_reads_the_whole_file_and_caches_the_digest(tmp_path):
    from offline_eval.inference.store import Store
    from offline_eval.modelfiles import fingerprint as fp

    f = tmp_path / "w.gguf"
    data = bytearray(os.urandom(20 << 20))  # over the old 8 MB head+tail limit
    f.write_bytes(bytes(data))
    store = Store(tmp_path / "store.sqlite")
    first = fp.files_fingerprint(f, store)
    data[10 << 20] ^= 0xFF  # a byte in the middle; same path, same size
    f.write_bytes(bytes(data))
    fp._MEMO.clear()
    assert fp.files_fingerprint(f, store) != first

    # Unchanged (path, size, mtime, inode): the digest comes from the store, the file is not read again.
    fp._MEMO.clear()
    reads = []
    real = fp.hashlib.file_digest
    fp.hashlib.file_digest = lambda *a, **k: reads.append(1) or real(*a, **k)  # type: ignore[assignment]
    try:
        again = fp.files_fingerprint(f, Store(tmp_path / "store.sqlite"))
    finally:
        fp.hashlib.file_digest = real  # type: ignore[assignment]
    assert reads == [] and again == fp.files_fingerprint(f)
    store.close()


def padded_gguf(src: Path, dst: Path) -> int:
    """A copy of a GGUF over 8 MB whose tensors lie in the middle: a 5 MB metadata string before them and
    4 MB of trailing zeros after. Returns an offset inside the tensor data."""
    import struct

    b = src.read_bytes()
    magic, ver, n_tensors, n_kv = struct.unpack_from("<4sIQQ", b, 0)
    key, size = b"offline_eval.test_padding", 5 << 20
    while (8 + len(key) + 4 + 8 + size) % 32:  # keep the data section's alignment
        size += 1
    kv = struct.pack("<Q", len(key)) + key + struct.pack("<IQ", 8, size) + b"p" * size
    dst.write_bytes(struct.pack("<4sIQQ", magic, ver, n_tensors, n_kv + 1) + kv + b[24:] + b"\0" * (4 << 20))
    return len(kv) + len(b) - 400_000


@pytest.mark.engine
def test_changed_weights_are_not_served_from_the_store(tmp_path, tiny):
    gguf = tmp_path / "model.gguf"
    inside = padded_gguf(TINY / "gguf" / "tiny-f16.gguf", gguf)
    size = gguf.stat().st_size
    assert size > 8 << 20 and 4 << 20 < inside < size - (4 << 20)
    cfg = write_config(tmp_path, str(DATA), model_path=str(gguf), task_extra={"limit": 4})
    assert run_cli("sweep", str(cfg)).returncode == 0
    blob = bytearray(gguf.read_bytes())
    for i in range(inside - inside % 2, inside + 4096, 2):  # f16 low bytes: small changes, never NaN
        blob[i] ^= 0x0F
    gguf.write_bytes(bytes(blob))
    assert gguf.stat().st_size == size
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0, proc.stderr
    assert "4 generated, 0 cached" in proc.stderr, proc.stderr


# ---- 3. zero scored items: no score, ranked last, valid JSON


@pytest.mark.engine
def test_a_run_with_no_scored_items_has_no_score_and_ranks_last(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), task_extra={"limit": 4, "shots": [0]})
    _edit(
        cfg,
        lambda r: r["models"].append(
            {
                "name": "tiny-short",
                "backend": "llamacpp",
                "path": str(TINY / "gguf" / "tiny-q8_0.gguf"),
                "max_model_len": 16,
            }
        ),
    )
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    summary = strict_json(out / "summary.json")
    for f in (out / "results").rglob("*.jsonl"):
        for line in f.read_text(encoding="utf-8").splitlines():
            json.loads(line, parse_constant=lambda c, f=f: pytest.fail(f"bare {c} in {f}"))
    short = next(r for r in summary["runs"] if r["model"] == "tiny-short")  # type: ignore[index]
    m = typed(short)
    assert m["n_scored"] == 0 and m["n_skipped"] == 4
    assert m["f1"] is None and m["precision"] is None and m["recall"] is None and m["accuracy"] is None
    board = summary["leaderboards"]["jbeqa.0shot.constrained"]  # type: ignore[index]
    assert board[-1]["run"] == short["run"] and board[-1]["value"] is None and board[-1]["note"] == "no items"
    assert board[0]["value"] is not None
    md = (out / "report.md").read_text(encoding="utf-8")
    # The leaderboard matrix lists it last in its setting's column; the detailed table gives it no rank.
    matrix = md[md.index("## Leaderboard: jbeqa") : md.index("## Details")]
    rows = [line for line in matrix.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows[-1].startswith(f"| {short['run']} |") and "no items" in rows[-1] and "no items" not in rows[0]
    row = next(
        line for line in md.splitlines() if short["run"] in line and "no items" in line and line.startswith("| –")
    )
    assert "jbeqa.0shot.constrained" in row


def test_summary_never_holds_bare_nan(tmp_path):
    from offline_eval.runtime.fileio import write_json_atomic, write_jsonl_atomic

    write_json_atomic(tmp_path / "s.json", {"kappa": float("nan"), "x": [float("inf"), 1.5]})
    write_jsonl_atomic(tmp_path / "r.jsonl", [{"v": float("-inf")}])
    assert strict_json(tmp_path / "s.json") == {"kappa": None, "x": [None, 1.5]}
    assert strict_json(tmp_path / "r.jsonl") == {"v": None}


# ---- 4. one current state per run


@pytest.mark.engine
def test_a_failed_rerun_takes_the_run_off_the_leaderboard(tmp_path, tiny):
    gguf = tmp_path / "m.gguf"
    shutil.copy(TINY / "gguf" / "tiny-q8_0.gguf", gguf)
    cfg = write_config(tmp_path, str(DATA), model_path=str(gguf), task_extra={"limit": 3})
    assert run_cli("sweep", str(cfg)).returncode == 0
    gguf.write_bytes(b"GGUF but not really")  # the same run now fails to load
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 1
    summary = strict_json(tmp_path / "out" / "summary.json")
    assert summary["runs"] == []  # type: ignore[index]
    assert [f["run"] for f in summary["failures"]] == ["tiny-gguf.llamacpp.default.ctx2048"]  # type: ignore[index]
    assert summary["leaderboards"] == {}  # type: ignore[index]
    md = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "Failed runs" in md and "Leaderboard" not in md


# ---- 5. length-bounded strings compile on every engine

LONG_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["comment", "conclusion"],
    "properties": {
        "comment": {"type": "string", "maxLength": 10_000},
        "conclusion": {"type": "string", "minLength": 3, "maxLength": 1200},
    },
}


@pytest.mark.engine
@pytest.mark.parametrize("max_chars", [1200, 10_000])
def test_bounded_strings_compile_and_constrain_on_every_engine(engine, max_chars):
    from offline_eval.inference.constraints import JsonSchema, parse_json_strict
    from offline_eval.inference.requests import Request, Sampling
    from offline_eval.tasks.legalevalq.evaluator import schema as json_schema

    schema = json_schema(max_chars)
    reqs = [
        Request.chat(
            [{"role": "user", "content": f"評価してください {i}"}], Sampling(max_tokens=48), JsonSchema(schema)
        )
        for i in range(2)
    ]
    reqs.append(Request.chat([{"role": "user", "content": "評価"}], Sampling(max_tokens=24), JsonSchema(LONG_SCHEMA)))
    out = engine.generate(reqs)
    assert len(out) == 3
    for res, want in zip(out, [schema, schema, LONG_SCHEMA]):
        assert res.finish_reason in ("stop", "length")
        if res.finish_reason == "stop":  # a cut answer is a parse failure for the task; a finished one is valid
            jsonschema.validate(parse_json_strict(res.text), want)


def test_gbnf_for_a_long_bound_stays_small_and_exact():
    pytest.importorskip("llama_cpp")
    from offline_eval.inference.constrained.grammars import gbnf
    from offline_eval.inference.constraints import JsonSchema

    text = gbnf(JsonSchema(LONG_SCHEMA))
    assert len(text) < 2000, len(text)
    # 0..10,000 characters exactly: 100 chunks of 100, or up to 99 chunks plus up to 99 characters.
    assert "comment-chunk{0,99} char{0,99} | comment-chunk{100})" in text


@pytest.mark.engine
def test_a_grammar_llama_cpp_refuses_fails_the_run_in_one_line(tiny):
    from conftest import spec_for

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.constraints import Choice
    from offline_eval.inference.requests import Request, Sampling
    from offline_eval.runtime.errors import EngineError

    b = load_backend(spec_for("llamacpp", tiny))
    try:
        with pytest.raises(EngineError, match="llama.cpp refused the grammar"):
            b._check_grammar(
                'root ::= "a" undefined-rule',
                Request.chat([{"role": "user", "content": "x"}], Sampling(), Choice(["a"])),
            )
    finally:
        b.close()


@pytest.mark.engine
def test_default_legalevalq_evaluator_on_llamacpp_does_not_crash(tmp_path, tiny):
    from conftest import spec_for

    from offline_eval.inference.backends.registry import load_backend
    from offline_eval.inference.constraints import JsonSchema
    from offline_eval.inference.requests import Request, Sampling
    from offline_eval.tasks.legalevalq.evaluator import schema as json_schema
    from offline_eval.tasks.legalevalq.task import LegalEvalQOptions

    default = LegalEvalQOptions.model_fields["comment_max_chars"].default
    assert default == 1200
    b = load_backend(spec_for("llamacpp", tiny))
    try:
        (res,) = b.generate(
            [
                Request.chat(
                    [{"role": "user", "content": "回答を評価"}],
                    Sampling(max_tokens=32),
                    JsonSchema(json_schema(default)),
                )
            ]
        )
        assert res.output_tokens > 0
    finally:
        b.close()


# ---- 6. two sweeps into one folder


def test_a_second_sweep_on_a_busy_folder_is_refused(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), task_extra={"limit": 2})
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time; from offline_eval.runtime.lock import OutputLock\n"
                f"with OutputLock({str(out)!r}):\n    print('held', flush=True); time.sleep(60)"
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        last = assert_one_line_error(run_cli("sweep", str(cfg)), "another sweep is writing", f"PID {holder.pid}")
        assert str(out) in last
    finally:
        holder.kill()
        holder.wait()
    # The holder died without cleaning up: the lock is not stale.
    assert run_cli("sweep", str(cfg)).returncode == 0


@pytest.mark.engine
def test_concurrent_sweeps_never_lose_a_run(tmp_path, tiny):
    """6 trials of two real sweeps started together on one folder (each on its own model): each either
    finishes with its run in the final summary, or is refused in one line; no run that finished vanishes."""
    cfg = write_config(tmp_path, str(DATA), task_extra={"limit": 2})
    _edit(cfg, lambda r: r["models"].append({**r["models"][0], "name": "tiny-b"}))
    for trial in range(6):
        out = tmp_path / f"out{trial}"
        procs = {
            name: subprocess.Popen(
                [*CLI, "sweep", str(cfg), "--only", name, "--out", str(out)],
                cwd=ROOT,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in ("tiny-gguf", "tiny-b")
        }
        finished = []
        for name, p in procs.items():
            _, err = p.communicate(timeout=300)
            if p.returncode == 0:
                finished.append(name)
            else:
                assert "another sweep is writing" in err.strip().splitlines()[-1], err
        assert finished
        runs = {r["model"] for r in strict_json(out / "summary.json")["runs"]}  # type: ignore[index]
        assert set(finished) <= runs, (trial, finished, runs)


# ---- 7. creating one store from many processes at once


def _open_store(path: str, barrier) -> str:  # type: ignore[no-untyped-def]
    from offline_eval.inference.store import Store

    barrier.wait()
    try:
        Store(path).close()
        return "ok"
    except Exception as e:  # noqa: BLE001 - the test reports what failed
        return f"{type(e).__name__}: {e}"


def test_many_processes_can_create_one_store_at_once(tmp_path):
    """20 rounds x 4 processes = 80 simultaneous opens of a store that does not exist yet."""
    import multiprocessing as mp

    ctx = mp.get_context("fork")
    outcomes = []
    with ctx.Manager() as manager, ctx.Pool(4) as pool:
        barrier = manager.Barrier(4)  # cyclic: all four open together, every round
        for i in range(20):
            path = str(tmp_path / f"s{i}" / "store.sqlite")
            outcomes += pool.starmap(_open_store, [(path, barrier)] * 4)
    assert outcomes == ["ok"] * 80, [o for o in outcomes if o != "ok"][:3]


def test_a_corrupt_store_is_named_and_fresh_moves_it_aside(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), task_extra={"limit": 2})
    out = tmp_path / "out"
    out.mkdir()
    (out / "store.sqlite").write_bytes(b"this is not an SQLite database" * 100)
    last = assert_one_line_error(run_cli("sweep", str(cfg)), str(out / "store.sqlite"), "--fresh")
    assert "Traceback" not in last
    proc = run_cli("sweep", str(cfg), "--fresh")
    assert proc.returncode == 0, proc.stderr
    assert "moved it to" in proc.stderr
    assert len(list(out.glob("store.sqlite.corrupt-*"))) == 1
    con = sqlite3.connect(str(out / "store.sqlite"))
    assert con.execute("SELECT COUNT(*) FROM outputs").fetchone()[0] == 2
    con.close()


# ---- 10-14. bad input accepted, or badly explained


def test_duplicate_keys_in_models_yaml_name_both_lines(tmp_path):
    cfg = tmp_path / "models.yaml"
    cfg.write_text(
        "models:\n  - name: a\n    backend: llamacpp\n    path: x.gguf\n    variants:\n"
        "      q8: {file: a.gguf}\n      q4: {file: b.gguf}\n      q8: {file: c.gguf}\n"
        "tasks:\n  jbeqa: {protocol: offline-eval, data: d}\n",
        encoding="utf-8",
    )
    assert_one_line_error(run_cli("models", "check", str(cfg)), str(cfg), "duplicate key 'q8'", "lines 6 and 8")


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda r: r["models"][0].update(max_model_len=True), "models.0.max_model_len"),
        (lambda r: r["models"][0].update(max_model_len=[2048, True]), "models.0.max_model_len"),
        (lambda r: r["tasks"]["jbeqa"].update(mode=[]), "tasks.jbeqa.mode"),
        (lambda r: r["tasks"]["jbeqa"].update(shots=[]), "tasks.jbeqa.shots"),
        (lambda r: r["tasks"]["jbeqa"].update(bootstrap=100_000_000), "tasks.jbeqa.bootstrap"),
        (lambda r: r["models"][0].update(trust_remote_code="yes"), "models.0.trust_remote_code"),
    ],
)
@pytest.mark.slow
def test_meaningless_config_values_are_refused(tmp_path, change, needle):
    cfg = write_config(tmp_path, str(DATA))
    _edit(cfg, change)
    for cmd in (["models", "check", str(cfg)], ["sweep", str(cfg), "--dry-run"]):
        assert_one_line_error(run_cli(*cmd), str(cfg), needle)


@pytest.mark.parametrize("args, needle", [(["--only", ""], "--only"), (["--tasks", ","], "--tasks")])
@pytest.mark.slow
def test_empty_name_lists_are_refused(tmp_path, args, needle):
    cfg = write_config(tmp_path, str(DATA))
    assert_one_line_error(run_cli("sweep", str(cfg), *args), needle, "empty list")


def test_quantize_to_nothing_is_refused(tmp_path):
    assert_one_line_error(run_cli("quantize", str(TINY / "gguf" / "tiny-f16.gguf"), "--to", ""), "--to")


@pytest.mark.engine
def test_engine_args_that_clash_or_do_not_exist_fail_that_variant_only(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), task_extra={"limit": 2})
    _edit(
        cfg,
        lambda r: r["models"].extend(
            [
                {**r["models"][0], "name": "clash", "engine_args": {"n_ctx": 64}},
                {**r["models"][0], "name": "typo", "engine_args": {"n_batchh": 8}},
            ]
        ),
    )
    proc = run_cli("sweep", str(cfg))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    summary = strict_json(tmp_path / "out" / "summary.json")
    reasons = {f["model"]: f["reason"] for f in summary["failures"]}  # type: ignore[index]
    assert "engine_args.n_ctx" in reasons["clash"] and "max_model_len" in reasons["clash"]
    assert "engine_args.n_batchh" in reasons["typo"] and "n_batch" in reasons["typo"]
    assert {r["model"] for r in summary["runs"]} == {"tiny-gguf"}  # type: ignore[index]


@pytest.mark.slow
def test_field_map_only_where_a_task_has_one_and_only_known_fields(tmp_path):
    assert_one_line_error(
        run_cli("data", "validate", "jbeqa", str(DATA), "--field-map", '{"id": "x"}'), "--field-map", "no field map"
    )
    lr = ROOT / "data" / "legalrikai"
    assert_one_line_error(
        run_cli("data", "validate", "statrev", str(lr / "statrev.jsonl"), "--field-map", '{"contrakt": "c"}'),
        "field_map",
        "contrakt",
    )
    assert_one_line_error(
        run_cli("data", "validate", "legalrikai", str(lr), "--field-map", '{"contrakt": "c"}'), "field_map", "contrakt"
    )


@pytest.mark.slow
def test_data_validate_runs_the_sweeps_checks(tmp_path):
    only_train = tmp_path / "jbe"
    only_train.mkdir()
    shutil.copy(DATA / "train.jsonl", only_train / "train.jsonl")
    assert_one_line_error(run_cli("data", "validate", "jbeqa", str(only_train), "--protocol", "offline-eval"), "test")
    queries = json.loads((ROOT / "data" / "legalevalq" / "queries.json").read_text(encoding="utf-8"))
    queries[2]["datasets_id"] = queries[0]["datasets_id"]  # the same id twice in one resource
    queries[2]["resource"] = queries[0]["resource"]
    q = tmp_path / "queries.json"
    q.write_text(json.dumps(queries, ensure_ascii=False), encoding="utf-8")
    assert_one_line_error(
        run_cli("data", "validate", "legalevalq", str(q)), str(q), "record 3", "duplicate datasets_id"
    )


@pytest.mark.slow
def test_report_on_a_damaged_summary_names_the_field(tmp_path):
    (tmp_path / "summary.json").write_text(
        json.dumps({"schema_version": 3, "runs": [{"run": "a", "setting": "s", "task": "jbeqa", "model": "m"}]})
    )
    assert_one_line_error(run_cli("report", str(tmp_path)), "summary.json", "runs.0.variant", "required")
    (tmp_path / "summary.json").write_text(json.dumps({"version": 1, "runs": []}))
    assert_one_line_error(
        run_cli("report", str(tmp_path)), "summary.json", "schema_version", "schema version 1", "re-run the sweep"
    )
    (tmp_path / "summary.json").write_text(json.dumps([1, 2]))
    assert_one_line_error(run_cli("report", str(tmp_path)), "summary.json", "runs")


# ---- 15. file modes follow the umask


@pytest.mark.engine
def test_outputs_respect_the_umask(tmp_path, tiny):
    cfg = write_config(tmp_path, str(DATA), task_extra={"limit": 2})
    proc = subprocess.run(
        ["sh", "-c", 'umask 022 && exec "$@"', "sh", *CLI, "sweep", str(cfg)], cwd=ROOT, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    out = tmp_path / "out"
    for f in [out / "summary.json", out / "report.md", out / "report.html", *(out / "results").rglob("*.jsonl")]:
        assert stat.S_IMODE(f.stat().st_mode) == 0o644, f
