"""chat_template: auto | none | FILE | TEXT. The plain prompt format for models without a chat template (base
models), on every engine and in the dry-run planner; and template values that must fail before any engine
starts (a missing file must never become the template text)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from conftest import DATA, TINY, metric, run_cli, run_tiny_jbeqa

from offline_eval.inference.backends.chat import (
    PLAIN_ANSWER,
    PLAIN_QUESTION,
    checked_setting,
    gguf_chat_template,
    hf_folder_chat_template,
    render_plain,
)
from offline_eval.inference.backends.registry import spec_fingerprint
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.backends.templates import model_prompt_format
from offline_eval.models.spec import ModelSpec
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa import SYSTEM_PROMPT

GOOD = "{{ bos_token }}{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}[assistant] "


def one_line_error(proc, *needles: str) -> str:  # type: ignore[no-untyped-def]
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def write_config(tmp_path: Path, models: list[dict], **task: object) -> Path:
    cfg = tmp_path / "models.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {
                "output_dir": str(tmp_path / "out"),
                "models": models,
                "tasks": {"jbeqa": {"protocol": "offline-eval", "data": str(DATA), "bootstrap": 0, **task}},
            },
            allow_unicode=True,
        ),
        encoding="utf-8",
    )
    return cfg


def gguf_model(name: str, path: Path, **kw: object) -> dict:
    return {"name": name, "backend": "llamacpp", "path": str(path), "max_model_len": 2048, **kw}


# --- the plain format -------------------------------------------------------------------------------------------


def test_plain_format_layout():
    msgs = [
        {"role": "system", "content": "指示"},
        {"role": "user", "content": "問一\n記述：甲"},
        {"role": "assistant", "content": "1"},
        {"role": "user", "content": "問二"},
    ]
    assert render_plain(msgs) == "指示\n\n質問：問一\n記述：甲\n回答：1\n\n質問：問二\n回答："
    assert render_plain(msgs[1:]) == "質問：問一\n記述：甲\n回答：1\n\n質問：問二\n回答："
    assert render_plain(msgs[:3]) == "指示\n\n質問：問一\n記述：甲\n回答：1"  # a last assistant turn is continued


def test_jbeqa_fewshot_in_the_plain_format():
    task = make_task("jbeqa", {"protocol": "offline-eval", "data": str(DATA), "shots": [4], "bootstrap": 0})
    items = task.load()
    req = task.build(items, {"shots": 4, "mode": "constrained"}).requests[0]
    text = render_plain(req.message_dicts())
    assert text.startswith(SYSTEM_PROMPT + "\n\n" + PLAIN_QUESTION)
    assert text.endswith(f"記述：{items[0].question}\n{PLAIN_ANSWER}")  # ends with the answer cue
    answers = [block.rsplit(PLAIN_ANSWER, 1)[1] for block in text.split("\n\n")[1:-1]]
    assert answers == ["1", "0", "1", "0"]  # the exemplars as question/answer pairs
    assert text.count(PLAIN_QUESTION) == 5 and "<|" not in text and "<s>" not in text


# --- values: auto, none, file, text -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value,want",
    [(None, None), ("auto", None), ("AUTO", None), ("", None), ("none", "none"), ("None", "none"), (GOOD, GOOD)],
)
def test_settings_normalise(value, want):
    assert checked_setting(value) == want


def test_relative_template_file_resolves_against_models_yaml(tmp_path: Path, monkeypatch):
    (tmp_path / "tpl").mkdir()
    (tmp_path / "tpl" / "chat.jinja").write_text(GOOD, encoding="utf-8")
    cfg = write_config(tmp_path, [gguf_model("m", TINY / "gguf" / "tiny-q8_0.gguf", chat_template="tpl/chat.jinja")])
    monkeypatch.chdir("/")
    from offline_eval.pipeline.config import load_config

    m = load_config(cfg).models[0]
    assert m.chat_template == str(tmp_path / "tpl" / "chat.jinja")
    assert m.load_spec("default").chat_template == GOOD  # the text: editing the file changes the store key


def test_store_keys_differ_between_none_and_auto_and_follow_the_template_file(tmp_path: Path):
    gguf = tmp_path / "m.gguf"  # any file: the key is what is compared, and the fast tier has no tiny models
    gguf.write_bytes(b"GGUF" + bytes(60))

    def key(**kw: object) -> str:
        return spec_fingerprint(ModelSpec.model_validate(gguf_model("m", gguf, **kw)).load_spec("default"))

    assert key() == key(chat_template="auto") == key(chat_template="AUTO")
    assert key(chat_template="none") != key()
    f = tmp_path / "t.jinja"
    f.write_text(GOOD, encoding="utf-8")
    first = key(chat_template=str(f))
    assert first not in (key(), key(chat_template="none"))
    f.write_text(GOOD.replace("[assistant]", "[model]"), encoding="utf-8")
    assert key(chat_template=str(f)) != first


# --- issue 15 item 1: bad values fail at validation, before any engine --------------------------------------------


@pytest.mark.parametrize("value", ["missing.jinja", "templates/chat_ja.j2", "prompts/base_model"])
@pytest.mark.slow
def test_missing_template_file_is_an_error_in_models_yaml(tmp_path: Path, value: str):
    cfg = write_config(tmp_path, [gguf_model("m", TINY / "gguf" / "tiny-q8_0.gguf", chat_template=value)])
    for cmd in (["models", "check", str(cfg)], ["sweep", str(cfg), "--limit", "2"], ["sweep", str(cfg), "--dry-run"]):
        proc = run_cli(*cmd)
        one_line_error(proc, str(cfg), "field 'models.0.chat_template'", "not found", value)
        assert "loading" not in proc.stderr
    assert not (tmp_path / "out" / "summary.json").exists()


@pytest.mark.slow
def test_missing_template_file_is_an_error_in_run(tmp_path: Path):
    proc = run_tiny_jbeqa(
        "--limit",
        "2",
        "--chat-template",
        "my_template.jinja",
        "--out",
        str(tmp_path / "o"),
    )
    one_line_error(proc, "field '--chat-template'", "chat template file not found: my_template.jinja")
    assert not (tmp_path / "o" / "summary.json").exists()


@pytest.mark.slow
def test_jinja_syntax_error_names_the_field_and_the_line(tmp_path: Path):
    bad = tmp_path / "bad.jinja"
    bad.write_text("{{ bos_token }}\n{% for m in messages %}\n{{ m['content'] }\n{% endfor %}\n", encoding="utf-8")
    cfg = write_config(tmp_path, [gguf_model("m", TINY / "gguf" / "tiny-q8_0.gguf", chat_template=str(bad))])
    err = one_line_error(
        run_cli("models", "check", str(cfg)), "field 'models.0.chat_template'", "Jinja syntax error on line 3", str(bad)
    )
    assert "line 3" in err
    proc = run_tiny_jbeqa(
        "--chat-template",
        "{% for m in messages %}\n{{ m.content }}",
        "--out",
        str(tmp_path / "o"),
    )
    one_line_error(proc, "field '--chat-template'", "Jinja syntax error on line 2 of the template text")


@pytest.mark.slow
def test_template_that_ignores_the_messages_is_refused(tmp_path: Path):
    cfg = write_config(tmp_path, [gguf_model("m", TINY / "gguf" / "tiny-q8_0.gguf", chat_template="{{ bos_token }}")])
    one_line_error(run_cli("models", "check", str(cfg)), "field 'models.0.chat_template'", "never uses `messages`")


def test_judge_template_is_checked_too(tmp_path: Path):
    from offline_eval.runtime.errors import InputError

    opts = {
        "protocol": "offline-eval",
        "data": "x",
        "judges": [gguf_model("j", TINY / "gguf" / "tiny-q8_0.gguf", chat_template="judge.jinja")],
    }
    with pytest.raises(InputError, match=r"judges\.0\.chat_template.*not found: judge\.jinja"):
        make_task("legalrikai", opts, "models.yaml")


# --- template-less copies of the tiny model -----------------------------------------------------------------------


def rewrite_gguf(src: Path, dst: Path, drop: tuple[str, ...] = (), set_bool: dict[str, bool] | None = None) -> Path:
    """Copy a GGUF with some metadata keys dropped or some booleans changed, tensors untouched."""
    import gguf

    r = gguf.GGUFReader(str(src))
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(str(dst), arch=arch)
    for f in r.fields.values():
        if f.name.startswith("GGUF.") or f.name == "general.architecture" or f.name in drop:
            continue
        vtype = f.types[0]
        sub = f.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = (set_bool or {}).get(f.name, f.contents())
        w.add_key_value(f.name, value, vtype, sub_type=sub)
    for t in r.tensors:
        w.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for t in r.tensors:
        w.write_tensor_data(t.data)
    w.close()
    return dst


@pytest.fixture(scope="module")
def bare(tiny: Path, tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    """The tiny model with its chat template removed: bare/hf and bare/tiny-f16.gguf."""
    out = tmp_path_factory.mktemp("bare")
    shutil.copytree(tiny / "hf", out / "hf")
    (out / "hf" / "chat_template.jinja").unlink(missing_ok=True)
    cfg_file = out / "hf" / "tokenizer_config.json"
    cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    cfg.pop("chat_template", None)
    cfg_file.write_text(json.dumps(cfg, ensure_ascii=False, indent=2), encoding="utf-8")
    rewrite_gguf(tiny / "gguf" / "tiny-f16.gguf", out / "tiny-f16.gguf", drop=("tokenizer.chat_template",))
    return out


def test_template_less_copies_have_no_template(tiny: Path, bare: Path):
    from transformers import AutoTokenizer

    assert gguf_chat_template(str(tiny / "gguf" / "tiny-f16.gguf"))
    assert gguf_chat_template(str(bare / "tiny-f16.gguf")) is None
    assert hf_folder_chat_template(str(tiny / "hf")) and hf_folder_chat_template(str(bare / "hf")) is None
    assert AutoTokenizer.from_pretrained(str(bare / "hf")).chat_template is None
    assert model_prompt_format(None, "llamacpp", str(bare / "tiny-f16.gguf")) == "plain"
    assert model_prompt_format(None, "transformers", str(bare / "hf")) == "plain"
    assert model_prompt_format(None, "vllm", str(tiny / "hf")) == "chat"
    assert model_prompt_format("none", "llamacpp", str(tiny / "gguf" / "tiny-f16.gguf")) == "plain"
    assert model_prompt_format(GOOD, "transformers", str(bare / "hf")) == "chat"


def test_unreadable_model_header_is_an_input_error_naming_the_file(tiny: Path, tmp_path: Path):
    """A damaged GGUF or tokenizer_config.json fails its own run (an InputError naming the file), never the sweep."""
    from offline_eval.runtime.errors import InputError

    cut = tmp_path / "cut.gguf"
    cut.write_bytes((tiny / "gguf" / "tiny-f16.gguf").read_bytes()[:64])
    with pytest.raises(InputError, match="cut.gguf: cannot read the model's chat template"):
        model_prompt_format(None, "llamacpp", str(cut))
    shutil.copytree(tiny / "hf", tmp_path / "hf")
    (tmp_path / "hf" / "chat_template.jinja").unlink()
    (tmp_path / "hf" / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match="cannot read the model's chat template"):
        model_prompt_format(None, "transformers", str(tmp_path / "hf"))
    assert model_prompt_format("none", "llamacpp", str(cut)) == "plain"  # nothing to read


def test_plain_prompt_gets_bos_where_the_gguf_asks_for_it(tiny: Path, bare: Path, tmp_path: Path):
    from offline_eval.inference.backends.llamacpp.backend import LlamaCppBackend
    from offline_eval.inference.requests import Request

    req = Request.chat([{"role": "system", "content": "指示"}, {"role": "user", "content": "民法"}])
    with_bos = rewrite_gguf(
        bare / "tiny-f16.gguf", tmp_path / "bos.gguf", set_bool={"tokenizer.ggml.add_bos_token": True}
    )
    ids = {}
    for name, path in (("no-bos", bare / "tiny-f16.gguf"), ("bos", with_bos)):
        b = LlamaCppBackend(LoadSpec(name=name, backend="llamacpp", path=str(path), engine_args={"vocab_only": True}))
        assert b.chat_template is None and b.render(req) == "指示\n\n質問：民法\n回答："
        ids[name] = b.encode([req])[0]
        bos = b.llm.token_bos()
        b.close()
    assert ids["bos"] == [bos] + ids["no-bos"] and ids["no-bos"][0] != bos


def test_plain_prompt_on_hf_tokenizers_gets_their_special_tokens(bare: Path):
    from transformers import AutoTokenizer

    from offline_eval.inference.backends.chat import hf_encode, hf_render
    from offline_eval.inference.requests import Request

    tok = AutoTokenizer.from_pretrained(str(bare / "hf"))
    req = Request.chat([{"role": "user", "content": "民法"}])
    assert hf_render(tok, None, req) == "質問：民法\n回答："
    ids = hf_encode(tok, None, [req])[0]
    assert ids == tok.encode("質問：民法\n回答：", add_special_tokens=True)
    assert (ids[0] == tok.bos_token_id) == (tok.encode("x")[0] == tok.bos_token_id)


# --- every engine, every mode, 4-shot JBE-QA on the template-less model ------------------------------------------

LIMIT = 6
MODES = ["constrained", "free", "logprob"]


@pytest.fixture(scope="module")
def bare_sweep(tiny: Path, bare: Path, tmp_path_factory):  # type: ignore[no-untyped-def]
    """One sweep, each engine started once: the template-less model on vLLM, llama.cpp and transformers."""
    tmp = tmp_path_factory.mktemp("sweep")
    models = [
        gguf_model("bare-gguf", bare / "tiny-f16.gguf"),
        {"name": "bare-hf", "backend": "transformers", "path": str(bare / "hf"), "max_model_len": 2048},
        {"name": "bare-vllm", "backend": "vllm", "path": str(bare / "hf"), "max_model_len": 2048},
    ]
    cfg = write_config(tmp, models, shots=[4], mode=MODES, limit=LIMIT)
    proc = run_cli("sweep", str(cfg), timeout=1200)
    dry = run_cli("sweep", str(cfg), "--dry-run")
    summary = json.loads((tmp / "out" / "summary.json").read_text(encoding="utf-8"))
    return proc, dry, summary, tmp / "out"


@pytest.mark.engine
def test_every_engine_runs_every_mode_on_a_model_without_a_template(bare_sweep):
    proc, _, summary, out = bare_sweep
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert not summary["failures"]
    runs = {(r["backend"], r["options"]["mode"]): r for r in summary["runs"]}
    assert set(runs) == {(b, m) for b in ("llamacpp", "transformers", "vllm") for m in MODES}
    for (_backend, mode), r in runs.items():
        assert r["prompt_format"] == "plain"
        assert r["n_items"] == LIMIT and metric(r, "n_scored") == LIMIT
        recs = [json.loads(x) for x in (out / "results" / r["run"] / f"{r['setting']}.jsonl").read_text().splitlines()]
        if mode == "constrained":  # the grammar leaves only a bare label after the answer cue
            assert metric(r, "faithfulness") == 1.0 and all(x["parsed"] in (0, 1) for x in recs)
        if mode == "logprob":
            assert all(set(x["logprobs"]) == {"0", "1"} for x in recs)
        if mode == "free":
            assert all(x["finish_reason"] in ("stop", "length") for x in recs)
    # One line per model load says the model has no template and the plain format is used; never a failure.
    notes = [line for line in proc.stderr.splitlines() if "has no chat template" in line]
    assert len(notes) == 3 and all("plain format" in n for n in notes)


@pytest.mark.engine
def test_engines_and_planner_count_the_same_plain_prompts(bare_sweep, tiny: Path):
    """vLLM and transformers share the HF tokenizer: identical prompt lengths. llama.cpp's differs only by the BOS
    each tokenizer asks for. The dry-run plan counts exactly what the engines ran."""
    from transformers import AutoTokenizer

    proc, dry, summary, out = bare_sweep
    assert proc.returncode == 0 and dry.returncode == 0, dry.stderr
    tokens = {}
    for r in summary["runs"]:
        recs = [json.loads(x) for x in (out / "results" / r["run"] / f"{r['setting']}.jsonl").read_text().splitlines()]
        tokens[(r["backend"], r["options"]["mode"])] = [x["prompt_tokens"] for x in recs]
        planned = f"{r['setting']}: {LIMIT} requests, {sum(tokens[(r['backend'], r['options']['mode'])])} prompt tokens"
        block = dry.stderr.split(f"load {r['run']}")[1].split("] load ")[0]
        assert planned in block, (planned, block)
    hf_bos = AutoTokenizer.from_pretrained(str(tiny / "hf")).encode("x")[0] == 1
    gguf_bos = bool(_gguf_bool(tiny / "gguf" / "tiny-f16.gguf", "tokenizer.ggml.add_bos_token"))
    for mode in MODES:
        assert tokens[("vllm", mode)] == tokens[("transformers", mode)]
        assert [t + int(hf_bos) - int(gguf_bos) for t in tokens[("llamacpp", mode)]] == tokens[("transformers", mode)]
    assert dry.stderr.count("(prompt format: plain)") == 3


def _gguf_bool(path: Path, key: str) -> bool | None:
    import gguf

    f = gguf.GGUFReader(str(path)).fields.get(key)
    return None if f is None else bool(f.contents())


def test_none_is_the_plain_format_on_a_model_with_a_template(tiny: Path, bare: Path, tmp_path: Path):
    """Dry run, no engine: chat_template none on the templated model counts the same prompts as the template-less
    copy under auto, not its chat prompts (the planner once reused one model file's counts for both)."""
    gguf = tiny / "gguf" / "tiny-f16.gguf"
    models = [
        gguf_model("chat", gguf),
        gguf_model("none", gguf, chat_template="none"),
        gguf_model("bare", bare / "tiny-f16.gguf"),
        {"name": "hf-chat", "backend": "transformers", "path": str(tiny / "hf"), "max_model_len": 2048},
        {
            "name": "hf-none",
            "backend": "transformers",
            "path": str(tiny / "hf"),
            "max_model_len": 2048,
            "chat_template": "none",
        },
    ]
    cfg = write_config(tmp_path, models, shots=[4], mode=["constrained"], limit=LIMIT)
    dry = run_cli("sweep", str(cfg), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    counts = {}
    for name in ("chat", "none", "bare", "hf-chat", "hf-none"):
        block = dry.stderr.split(f"load {name}.")[1].split("] load ")[0]
        fmt = block.split("(prompt format: ")[1].split(")")[0]
        counts[name] = (fmt, int(block.split("requests, ")[1].split(" prompt tokens")[0]))
    assert counts["chat"][0] == "chat" and counts["none"][0] == counts["bare"][0] == "plain"
    assert counts["none"][1] == counts["bare"][1] != counts["chat"][1]
    assert counts["hf-chat"][0] == "chat" and counts["hf-none"][0] == "plain"
