"""LegalEval-Q's two protocols: `paper` (the authors', pinned to their code: lyxx3rd/LegalEval-Q at 4e78669) and
`offline-eval` (ours, whose requests must stay what they were before protocols existed)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, TINY, run_cli, typed

from offline_eval.inference.requests import request_json
from offline_eval.metrics import adj_score
from offline_eval.results.records import RunKey
from offline_eval.runtime.errors import InputError
from offline_eval.tasks import make_task
from offline_eval.tasks.legalevalq import authors
from offline_eval.tasks.legalevalq.data import query_ids
from offline_eval.tasks.legalevalq.scorer import content_text, inputs
from offline_eval.tasks.legalevalq.task import LegalEvalQRecord, scorer_example

DATA = ROOT / "data" / "legalevalq"
AUTHORS = ROOT / "tests" / "fixtures" / "legalevalq-authors"
SAMPLE = AUTHORS / "lq60_sample.json"  # records 0, 5, 31, 38, 46, 58, 59 of their 60-query file, verbatim
# A snapshot of the authors' repository, where this machine has one (the checks against it are skipped elsewhere).
MIRROR = Path("/work/.mirror/lyxx3rd+LegalEval-Q/repo")
SCORER = ROOT / "models" / "tiny-scorer"

# The authors' answer to their 60-query file's record 0, and a critique in their fine-tuned evaluator's format (the
# Evaluate_example notebook prints its comment and conclusion).
CONTENT = "《刑法》第一百三十七条规定了工程重大安全事故罪，第一百三十八条规定了教育设施重大安全事故罪。"
CRITIQUE = (
    "<reasoning>:内容紧扣题目要求，详细阐述了两种罪名的区别，专业知识准确。</reasoning>\n"
    "<ans>:该回复尝试深度回复但是存在一定程度的缺漏或问题.</ans>"
)


def _record0() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))[0]


def _task(tmp: Path, **options: Any) -> Any:
    (tmp / "scorer_config.json").write_text("{}")  # load() checks the folder is a scorer's; nothing here scores
    opts = {
        "data": str(SAMPLE),
        "scorer": str(tmp),
        "evaluator": {"name": "judge", "backend": "transformers", "path": str(tmp), "max_model_len": 4096},
        **options,
    }
    return make_task("legalevalq", opts)


# ---- the authors' strings, pinned to their file


def test_the_instruction_is_the_authors_string():
    s = authors.INSTRUCTION
    assert hashlib.sha256(s.encode("utf-8")).hexdigest() == (
        "c87ff244c450924a5480bbd3f15e527410301b33dd532d47f4dc3da06d49a0b7"
    )
    assert s[:20] == "下列给出了一个用户输入的询问query,"
    assert s[-20:] == "ing>\n<ans>结论等级</ans>"
    assert len(s) == 534
    assert str(authors.INSTRUCTION_SOURCE) == "lyxx3rd/LegalEval-Q@4e78669:src/evaluator_request.py:37"
    assert authors.SYSTEM == "你是一个有用的助手"
    assert (authors.EVALUATOR_MAX_NEW_TOKENS, authors.ANSWER_MAX_NEW_TOKENS) == (512, 1024)
    assert authors.GRADES == (
        "该回复属于完全不可用的回复",
        "该回复属于几乎不可用的回复",
        "该回复为不及格答案",
        "该回复为及格但是最基础回复",
        "该回复尝试深度回复但是存在明显短缺",
        "该回复尝试深度回复但是存在一定程度的缺漏或问题",
        "该回复几乎没有明显缺陷",
        "该回复几乎没有缺陷且存在明显闪光点",
    )


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no snapshot of lyxx3rd/LegalEval-Q on this machine")
def test_the_pinned_pieces_are_at_their_sources_in_the_authors_repository():
    def show(path: str) -> list[str]:
        out = subprocess.run(
            ["git", "-C", str(MIRROR), "show", f"{authors.COMMIT}:{path}"], capture_output=True, check=True
        )
        return out.stdout.decode("utf-8").splitlines()

    src = show(authors.EVALUATOR_FILE)
    line = src[int(authors.INSTRUCTION_SOURCE.lines) - 1]
    ours = next(x for x in (ROOT / "offline_eval/tasks/legalevalq/authors.py").read_text("utf-8").splitlines()
                if x.startswith("INSTRUCTION = "))  # fmt: skip
    assert line.removeprefix("instruction = ") == ours.removeprefix("INSTRUCTION = ")  # the literal, byte for byte
    assert f'system_content="{authors.SYSTEM}"' in src[int(authors.SYSTEM_SOURCE.lines) - 1]
    assert "max_new_tokens=512" in src[105]
    assert src[131].strip() == "input_content = f'<query>:{query}</query>\\n\\n<content>:{content}</content>'"
    assert src[132].strip() == 'instruction_input_content = f"{instruction}\\n{input_content}"'
    assert src[135].strip() == 'reasoning_strat = text.find("<reasoning>:")' and 'text.find("</ans>")' in src[138]
    assert src[142].strip() == "score = predict(reasoning,ans,input_content) *100"
    nb = show(authors.BATCH_NOTEBOOK)
    assert f'system_content=\\"{authors.SYSTEM}\\"' in nb[int(authors.ANSWER_SYSTEM_SOURCE.lines) - 1]
    assert "max_new_tokens=1024" in nb[78] and "chat_transformers_model(query)" in nb[256]


# ---- what the paper protocol sends


def test_the_evaluators_message_for_an_authors_query_is_theirs(tmp_path):
    rec = _record0()
    query = rec["query"]
    assert query == "分析《刑法》第一百三十七条和第一百三十八条中规定的两种重大安全事故罪的主要区别和共同点。"
    instruction = authors.INSTRUCTION
    # src/evaluator_request.py lines 132-133, written out
    input_content = f"<query>:{query}</query>\n\n<content>:{CONTENT}</content>"
    want = f"{instruction}\n{input_content}"
    task = _task(tmp_path, protocol="paper")
    items = task.load()
    assert items[0].id == "crimina_Law_chat:326"
    out = LegalEvalQRecord(id=items[0].id, query=query, output=CONTENT, finish_reason="stop", gold=None)
    phase = task.evaluation().phase(items, {RunKey("cand", "legalevalq"): [out]})
    (req,) = phase.requests
    assert req.messages == (("system", "你是一个有用的助手"), ("user", want))
    assert rec["resource"] not in req.messages[1][1]  # the authors show no resource
    assert req.constraint is None and req.sampling.max_tokens == 512
    assert task.evaluation().constraint({}) is None
    # the candidates: their system prompt, the bare query, 1024 new tokens
    (setting,) = task.settings()
    assert setting == {"evaluator": "judge", "mode": "authors"}
    cand = task.build(items, setting).requests[0]
    assert cand.messages == (("system", "你是一个有用的助手"), ("user", query))
    assert cand.sampling.max_tokens == 1024 and cand.constraint is None
    assert task.protocol == "paper" and task.model_sampling
    # under paper, an evaluator with local weights decodes as its generation_config says (sampling: model)
    assert task.options.evaluator.sampling == "model"


@pytest.mark.parametrize(
    "text,want",
    [
        (
            CRITIQUE,
            (
                "内容紧扣题目要求，详细阐述了两种罪名的区别，专业知识准确。",
                "该回复尝试深度回复但是存在一定程度的缺漏或问题.",
            ),
        ),
        # as their slicing: nothing stripped, the first tag of each kind
        ("x<reasoning>: 好 </reasoning><ans>: 差 </ans><ans>:y</ans>", (" 好 ", " 差 ")),
        ("<ans>:A</ans><reasoning>:R</reasoning>", ("R", "A")),
    ],
)
def test_their_tags_are_parsed_as_they_slice_them(text, want):
    assert authors.parse(text) == want


@pytest.mark.parametrize(
    "text",
    [
        "",
        "<reasoning>:内容准确。</reasoning>",  # no <ans>
        "<ans>:该回复几乎没有明显缺陷.</ans>",  # no <reasoning>
        "<reasoning>:内容准确。\n<ans>:该回复几乎没有明显缺陷.</ans>",  # no </reasoning>
        "<reasoning>:内容准确。</reasoning>\n<ans>:该回复几乎没有明显缺陷.",  # no </ans>
        "<reasoning>内容准确。</reasoning>\n<ans>该回复几乎没有明显缺陷.</ans>",  # no colons: their find() fails
        "</reasoning><reasoning>:R<ans>:A</ans>",  # closed before it opens: their slice is empty
    ],
)
def test_a_missing_tag_is_a_parse_failure(text):
    assert authors.parse(text) is None


def test_the_grade_is_recorded_and_the_scorer_gets_their_three_inputs():
    assert authors.grade_of("该回复尝试深度回复但是存在一定程度的缺漏或问题.") == authors.GRADES[5]
    assert authors.grade_of(" 该回复几乎没有明显缺陷。") == authors.GRADES[6]
    assert authors.grade_of("该回复还可以") is None
    rec0 = _record0()
    record = LegalEvalQRecord(id="x", query=rec0["query"], output=CONTENT, finish_reason="stop", gold=None)
    got = authors.parse(CRITIQUE)
    assert got is not None
    reasoning, ans = got
    # predict(reasoning, ans, input_content), src/evaluator_request.py line 143, written out
    assert inputs(scorer_example(record, reasoning, ans)) == (
        reasoning,
        "该回复尝试深度回复但是存在一定程度的缺漏或问题.",  # unchanged: the period stays
        f"<query>:{rec0['query']}</query>\n\n<content>:{CONTENT}</content>",
    )
    assert content_text("q", "a") == authors.input_content("q", "a")


def test_the_adj_score_of_table_10():
    """The paper's Table 10 (appendix A): AdjScore from each model's mean and std (population), to the table's
    rounding. Two scores mu - sigma and mu + sigma have that mean and that population std."""
    rows = [(94.09, 0.93, 93.16), (93.38, 1.65, 91.76), (89.78, 5.77, 84.36), (84.84, 12.14, 74.22),
            (81.99, 12.98, 70.79), (78.59, 14.49, 66.36), (55.31, 12.43, 45.16), (53.43, 18.53, 39.67),
            (23.23, 12.55, 15.08), (13.58, 12.99, 6.94)]  # fmt: skip
    for mu, sd, want in rows:
        assert adj_score([mu - sd, mu + sd]) == pytest.approx(want, abs=0.011), (mu, sd)


# ---- offline-eval: the requests of before


# sha256 of the settings, prompt template, ids and every request (candidates and evaluator) that the code before
# protocols (git HEAD at the protocols issue) built for the sample data: computed there by _requests_digest.
BEFORE = {
    "{}": "f8b380aae41bfdafa3540b10bcb95aefd1c919cb47063df0b5276c977bbe9a96",
    '{"evaluator_mode": "tags", "max_tokens": 48, "evaluator_max_tokens": 96, "comment_max_chars": 40, "seed": 3}': (
        "9d47ad6d999f7643504dcc442060d4c3eb6d9d25d6e1a442de8e51ae8a62782b"
    ),
    '{"evaluator_mode": "json", "comment_max_chars": 40}': (
        "d3da688f3116d3aacab0bffac6f33ca45cb58aa14bf6e9111048f9ecc849716f"
    ),
}


def _requests_digest(extra: dict[str, Any]) -> str:
    opts = {
        "data": str(DATA / "queries.json"),
        "validation_data": str(DATA / "validation_queries.json"),
        "scorer": str(SCORER),
        "evaluator": {"name": "judge", "backend": "transformers", "path": str(TINY / "hf"), "max_model_len": 1024},
        **extra,
    }
    task = make_task("legalevalq", opts)
    items = task.load()
    (setting,) = task.settings()
    phase = task.build(items, setting)
    recs = [
        LegalEvalQRecord(
            id=it.id,
            split=it.split,
            query=it.query,
            output=f"回答{i}です。",
            finish_reason="stop",
            gold=it.datasets_ans,
            skipped=(i == 3),
        )  # fmt: skip
        for i, it in enumerate(items)
    ]
    ev = task.evaluation().phase(items, {RunKey("cand.run", "legalevalq"): recs})
    blob = "\n".join(
        [
            json.dumps(setting, sort_keys=True, ensure_ascii=False),
            task.prompt_template(setting),
            *[it.id for it in items],
            *map(request_json, phase.requests),
            *ev.item_ids,
            *map(request_json, ev.requests),
        ]
    )
    return hashlib.sha256(blob.encode()).hexdigest()


@pytest.mark.parametrize("extra", list(BEFORE))
def test_offline_eval_makes_the_requests_of_before(extra):
    if not (SCORER / "scorer_config.json").is_file():
        pytest.skip("the tiny scorer is built by scripts/setup.sh")
    assert _requests_digest({**json.loads(extra), "protocol": "offline-eval"}) == BEFORE[extra]


# ---- the authors' query files


def test_the_authors_query_files_load_with_unique_ids(tmp_path):
    got = query_ids(str(SAMPLE))
    ids = [i for i, _ in got]
    assert ids == ["crimina_Law_chat:326", "crimina_Law_chat:13", "civil_law_generated_query:14",
                   "civil_law_generated_query:1", "human:1", "human:13", "human:14"]  # fmt: skip
    assert len({q.datasets_id for _, q in got}) == 4  # 13, 14 and 1 repeat across resources
    manifest = json.loads((AUTHORS / "ids.json").read_text(encoding="utf-8"))
    assert sorted(manifest) == sorted(authors.QUERY_FILES)
    for name, m in manifest.items():
        f = tmp_path / Path(name).name
        f.write_text(
            json.dumps([{"query": "q", "resource": r, "datasets_id": i} for r, i in m["pairs"]], ensure_ascii=False),
            encoding="utf-8",
        )
        ids = [i for i, _ in query_ids(str(f))]
        assert len(ids) == len(set(ids)) == m["records"], name
        repeats = len({i for _, i in m["pairs"]}) < m["records"]
        assert repeats == name.endswith(("_60.json", "_600.json")), name
        assert ids == ([f"{r}:{i}" for r, i in m["pairs"]] if repeats else [str(i) for _, i in m["pairs"]])
    # the sample data, whose ids never repeat, keeps its ids
    assert [i for i, _ in query_ids(str(DATA / "queries.json"))][:2] == ["jp-001", "jp-002"]


@pytest.mark.skipif(not MIRROR.is_dir(), reason="no snapshot of lyxx3rd/LegalEval-Q on this machine")
def test_the_id_manifest_is_the_authors_files(tmp_path):
    manifest = json.loads((AUTHORS / "ids.json").read_text(encoding="utf-8"))
    for name, m in manifest.items():
        raw = subprocess.run(["git", "-C", str(MIRROR), "show", f"{authors.COMMIT}:{name}"], capture_output=True,
                             check=True).stdout  # fmt: skip
        assert hashlib.sha256(raw).hexdigest() == m["sha256"], name
        f = tmp_path / Path(name).name
        f.write_bytes(raw)
        got = query_ids(str(f))
        assert [[q.resource, q.datasets_id] for _, q in got] == m["pairs"]
        if name.endswith("_60.json"):
            assert [q.model_dump() for _, q in got][:1] == json.loads(SAMPLE.read_text("utf-8"))[:1]


def test_a_repeated_pair_or_a_missing_resource_is_one_line_naming_the_record(tmp_path):
    rows = json.loads(SAMPLE.read_text(encoding="utf-8"))
    f = tmp_path / "q.json"
    f.write_text(json.dumps([*rows, {**rows[5], "query": "另一个问题"}], ensure_ascii=False), encoding="utf-8")
    with pytest.raises(InputError) as e:
        query_ids(str(f))
    assert str(e.value).startswith(
        f"{f}, record 8, field 'datasets_id': duplicate datasets_id '13' in resource 'human'"
    )
    assert "\n" not in str(e.value)
    f.write_text(json.dumps([*rows[:4], {**rows[4], "resource": None}], ensure_ascii=False), encoding="utf-8")
    with pytest.raises(InputError, match=rf"^{f}, record 5, field 'resource': datasets_id values repeat"):
        query_ids(str(f))


# ---- bad config


def _config(tmp: Path, task: dict[str, Any]) -> Path:
    (tmp / "w.bin").write_text("fake weights")
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [{"name": "cand", "backend": "fake", "path": str(tmp / "w.bin"), "max_model_len": 65536}],
        "tasks": {"legalevalq": task},
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False), encoding="utf-8")
    return p


@pytest.mark.parametrize(
    "extra,field,words",
    [
        ({"protocol": "nonsense"}, "protocol", "Input should be 'paper' or 'offline-eval'"),
        ({"protocol": "paper", "evaluator_mode": "json"}, "evaluator_mode", "'json' is offline-eval's evaluator"),
        ({"protocol": "paper", "evaluator_mode": "tags"}, "evaluator_mode", "'tags' is offline-eval's evaluator"),
        ({"protocol": "paper", "comment_max_chars": 80}, "comment_max_chars", "80 bounds the JSON constraint"),
        (
            {"protocol": "offline-eval", "evaluator_mode": "authors", "comment_max_chars": 80},
            "comment_max_chars",
            "the authors' evaluator",
        ),  # fmt: skip
    ],
)
def test_bad_protocol_options_are_one_line_naming_file_and_field(tmp_path, extra, field, words):
    ev = {"name": "judge", "backend": "fake", "path": str(tmp_path / "w.bin"), "max_model_len": 65536}
    cfg = _config(tmp_path, {"data": str(SAMPLE), "scorer": str(SCORER), "evaluator": ev, **extra})
    p = run_cli("models", "check", str(cfg))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    lines = [x for x in p.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and f"{cfg}, field 'tasks.legalevalq.{field}': " in lines[0] and words in lines[0], lines


def test_a_dump_of_paper_options_validates_again(tmp_path):
    """verify re-reads the task options the provenance keeps: the paper's defaults, as dumped, are accepted."""
    task = _task(tmp_path, protocol="paper")
    again = make_task("legalevalq", task.options.model_dump(mode="json"))
    assert again.options == task.options


# ---- end to end


def _paper_sweep(tmp: Path, candidate: dict[str, Any], evaluator: dict[str, Any], **task: Any) -> Path:
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [candidate],
        "tasks": {
            "legalevalq": {
                "protocol": "paper",
                "data": str(SAMPLE),
                "scorer": str(SCORER),
                "evaluator": evaluator,
                "bootstrap": 0,
                **task,
            }
        },
    }
    p = tmp / "m.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True, sort_keys=False), encoding="utf-8")
    proc = run_cli("sweep", str(p))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return tmp / "out"


def _stored(out: Path, evaluator: bool) -> list[dict[str, Any]]:
    """The requests the store holds of the candidate, or of the evaluator (its variant is "evaluator:...")."""
    with sqlite3.connect(out / "store.sqlite") as db:
        rows = db.execute("SELECT request, variant FROM outputs ORDER BY created").fetchall()
    return [json.loads(r) for r, v in rows if v.startswith("evaluator:") == evaluator]


def _results(out: Path) -> list[dict[str, Any]]:
    (f,) = (out / "results").rglob("legalevalq.jsonl")
    return [json.loads(x) for x in f.read_text(encoding="utf-8").splitlines()]


def _authors_message(query: str, answer: str) -> list[list[str]]:
    """The evaluator's messages as the store keeps them ([role, content] pairs), written out."""
    return [
        ["system", "你是一个有用的助手"],
        ["user", f"{authors.INSTRUCTION}\n<query>:{query}</query>\n\n<content>:{answer}</content>"],
    ]


@pytest.mark.slow
def test_paper_sweep_on_the_fake_engine_scores_the_authors_tags(tmp_path):
    """The evaluator answers in the authors' format; its generation_config asks for sampling, which its requests
    carry (with their seed); each answer is scored from the raw <ans> text."""
    pytest.importorskip("torch")
    if not (SCORER / "scorer_config.json").is_file():
        pytest.skip("the tiny scorer is built by scripts/setup.sh")
    (tmp_path / "w.bin").write_text("fake weights")
    ev_dir = tmp_path / "evaluator"
    ev_dir.mkdir()
    (ev_dir / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "temperature": 0.7, "top_p": 0.8, "top_k": 20}), encoding="utf-8"
    )
    cand_dir = tmp_path / "candidate"  # the candidate's own generation_config: the authors' generate() uses it
    cand_dir.mkdir()
    (cand_dir / "generation_config.json").write_text(
        json.dumps({"do_sample": True, "temperature": 0.6, "top_p": 0.9, "top_k": 30}), encoding="utf-8"
    )
    cand = {"name": "cand", "backend": "fake", "path": str(cand_dir), "max_model_len": 65536,
            "engine_args": {"default": CONTENT}}  # fmt: skip
    ev = {"name": "judge", "backend": "fake", "path": str(ev_dir), "max_model_len": 65536,
          "engine_args": {"answers": {"提起行政诉讼": "<reasoning>:没有结论</reasoning>"}, "default": CRITIQUE}}  # fmt: skip
    out = _paper_sweep(tmp_path, cand, ev)
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (run,) = s["runs"]
    assert run["protocol"] == "paper" and run["options"] == {"evaluator": "judge", "mode": "authors"}
    recs = _results(out)
    assert [r["id"] for r in recs][:2] == ["crimina_Law_chat:326", "crimina_Law_chat:13"]
    queries = {r["id"]: r["query"] for r in recs}
    asked = _stored(out, evaluator=True)
    assert sorted(json.dumps(a["messages"], ensure_ascii=False) for a in asked) == sorted(
        json.dumps(_authors_message(q, CONTENT), ensure_ascii=False) for q in queries.values()
    )
    assert all("constraint" not in a or a["constraint"] is None for a in asked)
    assert {(a["sampling"]["temperature"], a["sampling"]["top_p"], a["sampling"]["top_k"], a["sampling"]["seed"],
             a["sampling"]["max_tokens"]) for a in asked} == {(0.7, 0.8, 20, 0, 512)}  # fmt: skip
    for a in _stored(out, evaluator=False):
        assert a["messages"][0] == ["system", "你是一个有用的助手"]
        assert a["messages"][1][1] in queries.values() and a["sampling"]["max_tokens"] == 1024
        assert (a["sampling"]["temperature"], a["sampling"]["top_p"], a["sampling"]["top_k"]) == (0.6, 0.9, 30)
    for r in recs:
        e = r["evaluation"]
        if r["id"] == "human:1":  # the scripted critique with no <ans>: a counted failure, never scored
            assert r["parsed"] is None is e["conclusion"] is e["grade"] and not r["scores"]
        else:
            assert r["parsed"] == "该回复尝试深度回复但是存在一定程度的缺漏或问题." == e["conclusion"]
            assert e["comment"] == "内容紧扣题目要求，详细阐述了两种罪名的区别，专业知识准确。"
            assert e["grade"] == authors.GRADES[5] and 0 <= r["scores"]["quality"] <= 100
    m = typed(run)
    assert (m["n_evaluated"], m["evaluator_parse_failures"], m["n_scored"]) == (7, 1, 6)
    # the provenance says how the candidate decoded on this task (its generation_config's sampling)
    (load,) = [x for x in s["provenance"]["loads"] if x["role"] == "candidate"]
    sampling = load["decoding"]["tasks"]["legalevalq"]["sampling"]
    assert (sampling["temperature"], sampling["top_p"], sampling["top_k"]) == (0.6, 0.9, 30)
    # the evaluator's load records how it decoded (it read null); the evaluator and the scorer are named as
    # departures with where their identity is recorded: nothing here shows they are the authors' (issue 62, item 12)
    (ev_load,) = [x for x in s["provenance"]["loads"] if x["role"] == "evaluator"]
    got = ev_load["decoding"]["sampling"]
    assert (got["temperature"], got["top_p"], got["top_k"]) == (0.7, 0.8, 20) and ev_load["weights_digest"]
    assert [d.split(" (")[0] for d in run["departures"]] == ["the evaluator is judge", f"the scorer is {SCORER}, "
                                                              "trained by `offline-eval legaleval-q train`"]  # fmt: skip
    assert "not known to be the authors' fine-tuned Qwen2.5-7B" in run["departures"][0]


def test_paper_sweep_on_real_engines_sends_the_authors_requests(tmp_path, tiny):
    """Tiny random models on llama.cpp (candidate) and transformers (evaluator): the evaluator gets the authors'
    requests; it never writes their tags, so every critique is a counted parse failure."""
    if not (SCORER / "scorer_config.json").is_file():
        pytest.skip("the tiny scorer is built by scripts/setup.sh")
    cand = {"name": "cand", "backend": "llamacpp", "path": str(TINY / "gguf" / "tiny-q8_0.gguf"),
            "max_model_len": 2048}  # fmt: skip
    ev = {"name": "judge", "backend": "transformers", "path": str(TINY / "hf"), "max_model_len": 2048}
    out = _paper_sweep(tmp_path, cand, ev, limit=3, max_tokens=24, evaluator_max_tokens=32)
    recs = _results(out)
    assert len(recs) == 3
    answers = {r["query"]: r["output"] for r in recs}
    asked = _stored(out, evaluator=True)
    assert len(asked) == 3
    for a in asked:
        q = next(q for q in answers if f"<query>:{q}</query>" in a["messages"][1][1])
        assert a["messages"] == _authors_message(q, answers[q])
        assert a.get("constraint") is None and a["sampling"]["max_tokens"] == 32
        assert a["sampling"]["temperature"] == 0  # the tiny model's generation_config does not sample
    for a in _stored(out, evaluator=False):
        assert a["messages"] == [["system", "你是一个有用的助手"], ["user", a["messages"][1][1]]]
        assert a["messages"][1][1] in answers and a["sampling"]["max_tokens"] == 24
    s = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    (run,) = s["runs"]
    m = typed(run)
    assert run["protocol"] == "paper" and m["n_evaluated"] == 3
    assert m["evaluator_parse_failures"] == 3 - m["n_scored"]
