"""Nothing a server did not answer is stored or scored, and the API key never leaves the request: busy servers,
refused keys, refusals, redirects, trickling, oversized, malformed and non-finite replies, each from the scripted
server in hostile_server.py (vLLM's reply forms), through the openai backend and whole sweeps."""

from __future__ import annotations

import json
import math
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from conftest import CLI, DATA, ROOT, metric, typed
from hostile_server import MODEL, HostileServer, Reply, as_json, chat_reply, top_logprobs, trickle

pytestmark = (
    pytest.mark.slow
)  # hostile servers that trickle and time out on purpose: `make test` runs them, the fast tier does not

pytest.importorskip("httpx")  # the `server` extra

KEY = "sk-hostile-probe-4b1d9e"
KEY_ENV = "OFFLINE_EVAL_PROBE_KEY"


@pytest.fixture
def server():  # type: ignore[no-untyped-def]
    s = HostileServer()
    yield s
    s.close()


def config(tmp: Path, server: HostileServer, mode: str = "constrained", **model: object) -> Path:
    cfg = {
        "output_dir": str(tmp / "out"),
        "models": [
            {
                "name": "s",
                "backend": "openai",
                "base_url": server.url,
                "model": MODEL,
                "max_model_len": 4096,
                "timeout_s": 10,
                "retries": 2,
                **model,
            }
        ],
        "tasks": {
            "jbeqa": {
                "protocol": "offline-eval",
                "data": str(DATA),
                "shots": [0],
                "mode": [mode],
                "limit": 4,
                "bootstrap": 0,
            }
        },
    }
    p = tmp / "models.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def sweep(cfg: Path, **kw: object) -> dict:
    from offline_eval.pipeline.config import load_config
    from offline_eval.pipeline.options import SweepOptions
    from offline_eval.pipeline.orchestrate import run_sweep

    lines: list[str] = []
    summary = run_sweep(
        load_config(cfg), SweepOptions(source=str(cfg), progress=False, log=lines.append, **kw)
    ).to_json()
    summary["log"] = lines
    return summary


def stored(out: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(out / "store.sqlite") as db:
        return list(db.execute("SELECT text, finish_reason FROM outputs"))


def rate_line(summary: dict) -> str:
    return next(line for line in summary["log"] if "jbeqa.0shot" in line)


def backend(server: HostileServer, **opts: object):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.openai.backend import OpenAIBackend
    from offline_eval.inference.backends.spec import LoadSpec

    spec = LoadSpec(
        name="s",
        backend="openai",
        path="",
        max_model_len=4096,
        engine_options={"base_url": server.url, "model": MODEL, "timeout_s": 10, "retries": 1, **opts},
    )
    return OpenAIBackend(spec)


def chat(text: str = "記述", max_tokens: int = 4):  # type: ignore[no-untyped-def]
    from offline_eval.inference.requests import Request, Sampling

    return Request.chat([{"role": "user", "content": text}], Sampling(max_tokens=max_tokens))


# ---- 1. busy servers, refused keys and refusals are never answers


@pytest.mark.parametrize("status", [429, 503])
def test_a_busy_server_is_retried_honouring_retry_after(tmp_path, server, status):  # type: ignore[no-untyped-def]
    busy = {"left": 2}

    def behaviour(seen, n):  # type: ignore[no-untyped-def]
        if seen.path == "/v1/chat/completions" and busy["left"]:
            busy["left"] -= 1
            return Reply(status, as_json({"error": {"message": "slow down"}}), {"retry-after": "1"})
        return None

    server.behaviour = behaviour
    s = sweep(config(tmp_path, server, retries=3))
    assert not s["failures"] and metric(s["runs"][0], "parse_failures") == 0
    posts = server.posts()
    assert len(posts) == 4 + 2 and [t for t, _ in stored(tmp_path / "out")] == ["1"] * 4
    waits = [b.at - a.at for a, b in zip(posts, posts[1:])]
    assert max(waits) >= 0.95  # Retry-After: 1 honoured before the retry


def test_busy_to_the_end_stores_nothing_and_a_rerun_asks_again(tmp_path, server):  # type: ignore[no-untyped-def]
    server.behaviour = lambda seen, n: (
        Reply(429, as_json({"error": {"message": "rate limit"}})) if seen.path == "/v1/chat/completions" else None
    )
    s = sweep(config(tmp_path, server, retries=1))
    [failure] = s["failures"]
    assert "HTTP 429" in failure["reason"] and "after 2 tries" in failure["reason"]
    assert stored(tmp_path / "out") == [] and not s["runs"]
    server.behaviour = lambda seen, n: None
    again = sweep(config(tmp_path, server, retries=1))
    assert not again["failures"] and "4 generated, 0 cached" in rate_line(again)


def test_a_wrong_key_stops_the_load_naming_its_variable_and_the_right_key_generates_everything(
    tmp_path, server, monkeypatch
):  # type: ignore[no-untyped-def]
    def behaviour(seen, n):  # type: ignore[no-untyped-def]
        if seen.method == "POST" and seen.headers.get("authorization") != f"Bearer {KEY}":
            return Reply(401, as_json({"error": {"message": "Incorrect API key provided"}}))
        return None

    server.behaviour = behaviour
    monkeypatch.setenv(KEY_ENV, "wrong-key")
    cfg = config(tmp_path, server, api_key_env=KEY_ENV)
    s = sweep(cfg)
    [failure] = s["failures"]
    assert "refused the API key (HTTP 401" in failure["reason"] and KEY_ENV in failure["reason"]
    assert "constrained" not in failure["reason"]
    assert stored(tmp_path / "out") == []
    monkeypatch.setenv(KEY_ENV, KEY)
    again = sweep(cfg)
    assert not again["failures"] and "4 generated, 0 cached" in rate_line(again)
    assert metric(again["runs"][0], "parse_failures") == 0


def test_a_refused_request_is_not_stored_and_only_it_is_asked_again(tmp_path, server):  # type: ignore[no-untyped-def]
    refuse = {"on": True}

    def behaviour(seen, n):  # type: ignore[no-untyped-def]
        text = json.dumps((seen.body or {}).get("messages"), ensure_ascii=False)
        if seen.path == "/v1/chat/completions" and refuse["on"] and "保証契約" in text:
            return Reply(400, as_json({"error": {"message": "This model's maximum context length is 4096 tokens"}}))
        return None

    server.behaviour = behaviour
    s = sweep(config(tmp_path, server))
    [failure] = s["failures"]
    assert "1 of 4 requests got no answer" in failure["reason"] and "HTTP 400" in failure["reason"]
    assert "maximum context length" in failure["reason"] and len(stored(tmp_path / "out")) == 3
    refuse["on"] = False
    again = sweep(config(tmp_path, server))
    assert not again["failures"] and "1 generated, 3 cached" in rate_line(again)


def test_an_older_stores_refusals_are_never_served(tmp_path):  # type: ignore[no-untyped-def]
    from offline_eval.inference.requests import Result
    from offline_eval.inference.store import Row, Store

    store = Store(tmp_path / "store.sqlite")
    store.put_many([Row("k-ok", "m", "v", "{}", Result(text="1"))])
    store.db.execute(  # a row as 0.1 wrote a refused request
        "INSERT INTO outputs (key, model, variant, request, text, finish_reason, prompt_tokens, output_tokens, "
        "latency_s, logprobs, created, focused) VALUES ('k-err', 'm', 'v', '{}', "
        "'[server refused: HTTP 401: bad key]', 'error', 0, 0, 0.0, NULL, 0.0, 0)"
    )
    store.db.commit()
    assert set(store.get_many(["k-ok", "k-err"])) == {"k-ok"}
    store.put_many([Row("k-new", "m", "v", "{}", Result(text="[x]", finish_reason="error"))])
    assert store.count() == 2  # the error row above, never served, and k-ok: nothing new
    store.close()


# ---- 2. the key never leaks


def test_the_api_key_reaches_no_output_file_and_no_log_line(tmp_path, server, monkeypatch):  # type: ignore[no-untyped-def]
    """The server echoes the key: in a refusal's message, in a response header, in a 5xx body, in the answer
    itself, in a redirect and URL-encoded. A whole sweep in a subprocess (its log is its stderr)."""
    echoes = iter(  # one request at a time (max_concurrency 1), in this order
        [
            Reply(400, as_json({"error": {"message": f"header Authorization: Bearer {KEY} is malformed"}})),
            Reply(500, as_json({"error": f"upstream failed for Bearer {KEY}"})),  # retried: the next one answers
            Reply(200, as_json(chat_reply(f"1 {KEY}")), {"x-echo": f"Bearer {KEY}"}),
            Reply(302, as_json(chat_reply("1")), {"location": f"http://127.0.0.1:1/?key={KEY}"}),
        ]
    )

    def behaviour(seen, n):  # type: ignore[no-untyped-def]
        if seen.path == "/v1/chat/completions":
            return next(echoes, Reply(400, as_json({"detail": f"bad request from key={KEY.replace('-', '%2D')}"})))
        return None

    server.behaviour = behaviour
    monkeypatch.setenv(KEY_ENV, KEY)
    cfg = config(tmp_path, server, api_key_env=KEY_ENV, retries=1, max_concurrency=1)
    proc = subprocess.run([*CLI, "sweep", str(cfg)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1 and "[api key removed]" in proc.stderr, proc.stderr
    assert KEY not in proc.stdout + proc.stderr and KEY.replace("-", "%2D") not in proc.stderr
    out = tmp_path / "out"
    written = [p for p in out.rglob("*") if p.is_file()]
    assert {"summary.json", "report.md", "report.html", "store.sqlite", "engines.log"} <= {p.name for p in written}
    leaks = [p for p in written if KEY.encode() in p.read_bytes() or KEY.replace("-", "%2D").encode() in p.read_bytes()]
    assert not leaks
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert "[api key removed]" in summary["failures"][0]["reason"]
    assert "1 [api key removed]" in [t for t, _ in stored(out)]  # the answer that echoed it, without it


# ---- 5. a deadline bounds every request, 7. redirects are not answers, 8. replies have a size cap


@pytest.mark.parametrize("where", ["body", "headers"])
def test_a_trickling_server_cannot_hold_a_request(server, where):  # type: ignore[no-untyped-def]
    from offline_eval.runtime.errors import PartialFailure

    answer = as_json(chat_reply("1"))

    def behaviour(seen, n):  # type: ignore[no-untyped-def]
        if seen.path != "/v1/chat/completions":
            return None
        if where == "body":
            return Reply(200, trickle(answer, 0.1))  # about 60 s for the whole answer
        return Reply(200, answer, header_trickle_s=0.1)

    server.behaviour = behaviour
    b = backend(server, timeout_s=2)
    t0 = time.monotonic()
    with pytest.raises(PartialFailure, match=r"no complete answer .* within timeout_s=2 \(not re-sent"):
        b.generate([chat()])
    assert time.monotonic() - t0 < 30  # the trickle would take 60 s: the deadline cut it, however loaded the machine
    assert len(server.posts()) == 1
    b.close()


def test_a_redirect_with_an_answer_in_it_is_not_followed_nor_taken(server):  # type: ignore[no-untyped-def]
    from offline_eval.runtime.errors import PartialFailure

    server.behaviour = lambda seen, n: (
        Reply(307, as_json(chat_reply("1")), {"location": "/v1/elsewhere"})
        if seen.path == "/v1/chat/completions"
        else None
    )
    b = backend(server)
    with pytest.raises(PartialFailure, match="HTTP 307: a redirect, which is never followed"):
        b.generate([chat()])
    assert not [s for s in server.seen if s.path == "/v1/elsewhere"]
    b.close()


def test_an_oversized_reply_is_refused_without_reading_it_all(server):  # type: ignore[no-untyped-def]
    from offline_eval.runtime.errors import PartialFailure

    def huge():  # type: ignore[no-untyped-def]
        yield b'{"choices": [{"message": {"content": "'
        for _ in range(100):
            yield b"x" * 2**20  # 100 MiB in all, sent as it is read

    served = {"sent": 0}

    def behaviour(seen, n):  # type: ignore[no-untyped-def]
        if seen.path != "/v1/chat/completions":
            return None

        def counted():  # type: ignore[no-untyped-def]
            for part in huge():
                served["sent"] += len(part)
                yield part

        return Reply(200, counted())

    server.behaviour = behaviour
    b = backend(server)
    with pytest.raises(
        PartialFailure, match=r"sent more than 8 MiB .* the cap is 8 MiB plus 4 KiB per requested token"
    ):
        b.generate([chat(max_tokens=4)])
    b.close()
    assert served["sent"] < 40 * 2**20  # the client stopped reading near the cap, not at 100 MiB
    server.behaviour = lambda seen, n: (
        Reply(200, as_json(chat_reply("1")), {"content-length": str(200 * 2**20)})
        if seen.path.endswith("completions")
        else None
    )
    b = backend(server)
    with pytest.raises(PartialFailure, match="sent more than 8 MiB"):
        b.generate([chat()])
    b.close()


# ---- 6. non-finite logprobs, 10. replies that are not answers say what is wrong


@pytest.mark.parametrize("bad", ["NaN", "Infinity", "-Infinity", "null", '"-0.5"', "true"])
def test_a_non_finite_or_missing_logprob_is_a_parse_failure_never_an_answer(tmp_path, server, bad):  # type: ignore[no-untyped-def]
    reply = chat_reply("1", top_logprobs({"1": -0.1, "0": -2.3}))
    text = json.dumps(reply).replace('"logprob": -0.1', f'"logprob": {bad}')  # the label "1" gets the bad value

    server.behaviour = lambda seen, n: Reply(200, text.encode()) if seen.path == "/v1/chat/completions" else None
    s = sweep(config(tmp_path, server, mode="logprob"))
    assert not s["failures"]
    m = typed(s["runs"][0])
    assert m["parse_failures"] == 4 and m["n_scored"] == 4
    recs = [
        json.loads(x)
        for x in (tmp_path / "out" / "results" / "s.openai.default.ctx4096" / "jbeqa.0shot.logprob.jsonl")
        .read_text()
        .split("\n")
        if x
    ]
    assert {r["finish_reason"] for r in recs} == {"malformed"} and {r["parsed"] for r in recs} == {None}
    assert all("logprobs" not in r for r in recs)


@pytest.mark.parametrize(
    ("reply", "said"),
    [
        ({}, "no 'choices' list (got {})"),
        ({"choices": []}, "'choices' is empty"),
        ({"choices": ["1"]}, "choices[0] is not an object"),
        ({"choices": [{"message": "1"}]}, "choices[0].message is not an object"),
        ({"choices": [{"message": {"content": 1}}]}, "the answer's text is not a string"),
        (
            {**chat_reply("1"), "usage": {"prompt_tokens": "forty"}},
            'usage.prompt_tokens is not a count of tokens (got "forty")',
        ),
        ({**chat_reply("1"), "usage": {"prompt_tokens": 40, "completion_tokens": -1}}, "usage.completion_tokens"),
    ],
)
def test_a_reply_that_is_not_an_answer_says_what_is_wrong(tmp_path, server, reply, said):  # type: ignore[no-untyped-def]
    server.behaviour = lambda seen, n: Reply(200, as_json(reply)) if seen.path == "/v1/chat/completions" else None
    s = sweep(config(tmp_path, server))
    [failure] = s["failures"]
    assert "4 of 4 requests got no answer" in failure["reason"] and said in failure["reason"], failure["reason"]
    assert "KeyError" not in failure["reason"] and "IndexError" not in failure["reason"]
    assert stored(tmp_path / "out") == []


def test_a_key_refused_on_a_logprob_request_names_the_key_not_the_mode(tmp_path, server, monkeypatch):  # type: ignore[no-untyped-def]
    server.behaviour = lambda seen, n: (
        Reply(403, as_json({"error": {"message": "forbidden"}}))
        if seen.method == "POST" and "completions" in seen.path
        else None
    )
    monkeypatch.setenv(KEY_ENV, "k")
    s = sweep(config(tmp_path, server, mode="logprob", api_key_env=KEY_ENV))
    [failure] = s["failures"]
    assert "refused the API key (HTTP 403" in failure["reason"] and KEY_ENV in failure["reason"]
    assert "constrained" not in failure["reason"]


def test_finite_logprobs_still_answer(tmp_path, server):  # type: ignore[no-untyped-def]
    s = sweep(config(tmp_path, server, mode="logprob"))
    recs = [
        json.loads(x)
        for x in (tmp_path / "out" / "results" / "s.openai.default.ctx4096" / "jbeqa.0shot.logprob.jsonl")
        .read_text()
        .split("\n")
        if x
    ]
    assert not s["failures"] and {r["parsed"] for r in recs} == {1}
    assert all(math.isclose(r["logprobs"]["1"], -0.2) for r in recs)
