"""backend: openai against real servers on 127.0.0.1: vLLM's OpenAI server over the tiny HF folder and
llama-cpp-python's server over the tiny GGUF, each started on a free port by a module fixture.

A server's output goes to a log file, never to a pipe nobody reads: llama-cpp-python's server writes about
26 KB at start and 0.5 KB per request to stderr, and once an unread 64 KiB pipe is full it blocks in that
write while holding its model lock (about the 76th request), so every later request times out."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jsonschema
import pytest
import yaml
from conftest import metric

from offline_eval.inference.constraints import Choice, JsonSchema
from offline_eval.inference.requests import Request, Sampling
from offline_eval.pipeline.config import load_config
from offline_eval.pipeline.options import SweepOptions
from offline_eval.pipeline.orchestrate import run_sweep
from offline_eval.tasks.jbeqa.data import JBEQAItem

ROOT = Path(__file__).resolve().parent.parent
# A stalled server fails its test (pytest-timeout, counting fixture set-up) instead of hanging CI; the slowest
# test here (vLLM's server and an in-process vLLM) takes ~70 s on a loaded 2-core machine.
pytestmark = [pytest.mark.engine, pytest.mark.timeout(300)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    def __init__(self, kind: str, tiny: Path, port: int | None = None, args: list[str] | None = None) -> None:
        self.kind, self.tiny, self.port, self.args = kind, tiny, port or _free_port(), args or []
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.start()

    def start(self) -> None:
        py = sys.executable
        if self.kind == "vllm":
            cmd = [
                py,
                "-m",
                "vllm.entrypoints.openai.api_server",
                "--model",
                str(self.tiny / "hf"),
                "--served-model-name",
                "tiny",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--max-model-len",
                "2048",
                "--enforce-eager",
                "--gpu-memory-utilization",
                "0.1",
                "--seed",
                "0",
                "--structured-outputs-config",
                '{"backend":"xgrammar","disable_any_whitespace":true}',
            ]
        else:
            cmd = [
                py,
                "-m",
                "llama_cpp.server",
                "--model",
                str(self.tiny / "gguf" / "tiny-q8_0.gguf"),
                "--model_alias",
                "tiny",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--n_ctx",
                "2048",
                "--seed",
                "0",
                "--flash_attn",  # as the in-process engine loads it (LlamaCppBackend.load_defaults)
                "true",
                "--n_ubatch",
                "128",
            ]
        cmd += self.args
        env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_USE_V2_MODEL_RUNNER": "0", "HF_HUB_OFFLINE": "1"}
        self.log = tempfile.NamedTemporaryFile(prefix=f"offline-eval-{self.kind}-server-", suffix=".log")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        import httpx

        key = next((self.args[i + 1] for i, a in enumerate(self.args) if a in ("--api_key", "--api-key")), None)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        deadline = time.time() + 180
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} server exited: {self.log_tail()}")
            try:
                if httpx.get(self.url + "/models", headers=headers, timeout=1, trust_env=False).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"{self.kind} server did not start: {self.log_tail()}")

    def log_tail(self) -> str:
        return Path(self.log.name).read_text(encoding="utf-8", errors="replace")[-2000:]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


KINDS = ["vllm", "llamacpp"]


@pytest.fixture(scope="module")
def vllm_server(tiny):  # type: ignore[no-untyped-def]
    s = Server("vllm", tiny)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def llamacpp_server(tiny):  # type: ignore[no-untyped-def]
    s = Server("llamacpp", tiny)
    yield s
    s.stop()


def served(name: str, server: Server, **kw: object) -> dict:
    # max_concurrency is left to its per-server default (llama-cpp-python's: 1); a tiny-model request takes
    # well under a second, so 30 s without an answer is a stall, reported as one line (not re-sent)
    return {
        "name": name,
        "backend": "openai",
        "base_url": server.url,
        "model": "tiny",
        "max_model_len": 2048,
        "timeout_s": 30,
        **kw,
    }


def _config(tmp_path: Path, models: list[dict], modes: list[str]) -> Path:
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": models,
        "tasks": {
            "jbeqa": {
                "protocol": "offline-eval",
                "data": str(ROOT / "data" / "jbeqa"),
                "shots": [0],
                "mode": modes,
                "bootstrap": 0,
            }
        },
    }
    p = tmp_path / "models.yaml"
    p.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    return p


def _answers(out: Path, run_prefix: str, setting: str) -> dict[str, object]:
    [folder] = [d for d in (out / "results").iterdir() if d.name.startswith(run_prefix)]
    recs = [json.loads(x) for x in (folder / f"{setting}.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["id"]: (r["output"], r["parsed"]) for r in recs}


@pytest.mark.parametrize("kind", KINDS)
def test_served_jbeqa_equals_in_process_in_one_sweep_and_report(kind, tiny, tmp_path, request, monkeypatch):  # type: ignore[no-untyped-def]
    server = request.getfixturevalue(f"{kind}_server")
    if kind == "llamacpp":
        from offline_eval.inference.backends.llamacpp.backend import LlamaCppBackend

        # llama-cpp-python's server reuses its cache its own way (batches start where the previous prompt stopped
        # sharing); in process, the same path (create_completion) on the same sorted order computes the same logits
        monkeypatch.setattr(LlamaCppBackend, "fast_greedy", False)
    local = {
        "name": "local",
        "backend": kind,
        "max_model_len": 2048,
        "path": str(tiny / "hf") if kind == "vllm" else str(tiny / "gguf" / "tiny-q8_0.gguf"),
    }
    modes = ["constrained", "logprob"] if kind == "vllm" else ["constrained"]
    cfg = load_config(_config(tmp_path, [served("served", server), local], modes))
    summary = run_sweep(cfg, SweepOptions(source="models.yaml", progress=False, log=lambda m: None)).to_json()
    assert not summary["failures"], summary["failures"]
    out = Path(cfg.output_dir)
    for mode in modes:
        setting = f"jbeqa.0shot.{mode}"
        remote, here = _answers(out, "served.", setting), _answers(out, "local.", setting)
        assert len(remote) == 26 and remote == here
    runs = {r["run"]: r for r in summary["runs"] if r["setting"] == "jbeqa.0shot.constrained"}
    assert metric(runs["served.openai.default.ctx2048"], "constraint_violations") == 0
    assert metric(runs["served.openai.default.ctx2048"], "parse_failures") == 0
    report = (out / "report.md").read_text(encoding="utf-8")
    assert "served.openai.default.ctx2048" in report and "local." in report and "constraint violations" in report


JUDGE = {
    "type": "object",
    "properties": {"score": {"type": "integer", "enum": [0, 1, 2]}, "reason": {"type": "string", "maxLength": 12}},
    "required": ["score", "reason"],
    "additionalProperties": False,
}


def _runner(server: Server, tmp_path: Path, **kw: object):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.lazy import LazyBackend
    from offline_eval.inference.runner import Runner
    from offline_eval.inference.store import Store

    spec = load_config(_config(tmp_path, [served("m", server, **kw)], ["constrained"])).models[0].load_spec("default")
    engine = LazyBackend(spec)
    return Runner(engine, Store(tmp_path / "store.sqlite"), "default", progress=False), engine


@pytest.mark.parametrize("kind", KINDS)
def test_fifty_json_judge_answers_parse_and_validate(kind, tmp_path, request):  # type: ignore[no-untyped-def]
    from offline_eval.inference.constraints import parse_json_strict
    from offline_eval.inference.requests import Phase

    server = request.getfixturevalue(f"{kind}_server")  # the same server the sweep test used
    runner, engine = _runner(server, tmp_path)
    reqs = [
        Request.chat(
            [{"role": "user", "content": f"第{i}条の評価をJSONで返してください。"}],
            Sampling(max_tokens=128),
            JsonSchema(JUDGE),
        )
        for i in range(50)
    ]
    results, stats = runner.run(Phase("judge", reqs, [str(i) for i in range(50)]))
    in_flight = engine.get().concurrency
    engine.close()
    assert in_flight == (16 if kind == "vllm" else 1)  # the per-server default: llama-cpp-python answers one at a time
    assert stats.n_generated == 50
    assert stats.n_violations == sum(r.finish_reason == "violation" for r in results)
    for r in results:  # every answer either validates or is flagged; none is accepted unchecked
        if r.finish_reason == "stop":
            jsonschema.validate(parse_json_strict(r.text), JUDGE)
        else:
            assert r.finish_reason == "violation", r
    if kind == "llamacpp":  # our hardened GBNF: every answer is strict, schema-valid JSON
        assert stats.n_violations == 0
    print(f"{kind}: {stats.n_violations} of 50 JSON answers flagged as constraint violations")


def test_a_constraint_the_server_does_not_honour_is_caught(llamacpp_server, tmp_path):  # type: ignore[no-untyped-def]
    """The constraint is left out of the request body (as a server that ignores it would behave): every
    answer is checked against the Choice on our side, and those outside it are violations, never accepted."""
    from offline_eval.inference.requests import Phase
    from offline_eval.tasks.jbeqa.task import JBEQATask

    runner, engine = _runner(llamacpp_server, tmp_path)
    backend = engine.get()
    honest = backend.constraint_fields(Choice(["0", "1"]))
    assert honest == {"grammar": 'root ::= "0" | "1"'}
    backend.constraint_fields = lambda c: {}  # type: ignore[method-assign]
    reqs = [
        Request.chat([{"role": "user", "content": f"記述{i}は正しいか。"}], Sampling(max_tokens=4), Choice(["0", "1"]))
        for i in range(10)
    ]
    results, stats = runner.run(Phase("c", reqs, [str(i) for i in range(10)]))
    engine.close()
    off = [r for r in results if r.text not in ("0", "1")]
    assert off and stats.n_violations == sum(1 for r in off if r.finish_reason != "length")
    assert all(r.finish_reason in ("violation", "length") for r in off)
    task = JBEQATask(JBEQATask.Options(protocol="offline-eval", data="x"))
    item = JBEQAItem(id="i", year=2020, subject="Civil Law", subject_jp="民法", instruction="正誤", question="記述",
                     label="Y", answer=True)  # fmt: skip
    for r in off:
        assert task.score(item, r, {"mode": "constrained", "shots": 0}).parsed is None


def test_server_killed_mid_run_keeps_answers_and_rerun_sends_only_the_rest(tiny, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    from offline_eval.inference.backends.openai import backend as openai_backend

    server = Server("llamacpp", tiny)
    cfg_path = _config(tmp_path, [served("s", server, retries=1)], ["constrained"])
    sent = []
    real = openai_backend.OpenAIBackend._generate_one

    def killing(self, r):  # type: ignore[no-untyped-def]
        sent.append(r)
        if len(sent) == 6:
            server.stop()
        return real(self, r)

    monkeypatch.setattr(openai_backend.OpenAIBackend, "_generate_one", killing)
    try:
        first = run_sweep(
            load_config(cfg_path), SweepOptions(source="models.yaml", progress=False, log=lambda m: None)
        ).to_json()
        [failure] = first["failures"]
        assert "did not answer" in failure["reason"] and "5 of 26 answers kept" in failure["reason"]
        assert "\n" not in failure["reason"]
        server.start()
        second = run_sweep(
            load_config(cfg_path), SweepOptions(source="models.yaml", progress=False, log=lambda m: None)
        ).to_json()
    finally:
        server.stop()
    assert not second["failures"]
    [run] = second["runs"]
    assert run["throughput"]["generated"] == 21 and run["throughput"]["cached"] == 5


def test_dry_run_counts_prompts_with_the_servers_tokenizer(vllm_server, tiny, tmp_path):  # type: ignore[no-untyped-def]
    local = {"name": "local", "backend": "vllm", "path": str(tiny / "hf"), "max_model_len": 2048}
    cfg = load_config(_config(tmp_path, [served("served", vllm_server, max_model_len=None), local], ["constrained"]))
    lines: list[str] = []
    run_sweep(cfg, SweepOptions(source="models.yaml", dry_run=True, log=lines.append))
    import re

    counts = re.findall(r"requests, (\d+) prompt tokens,", "\n".join(lines[:-1]))  # served, then local
    assert len(counts) == 2 and counts[0] == counts[1] and int(counts[0]) > 0, lines


def test_connections_outside_the_config_are_refused(vllm_server):  # type: ignore[no-untyped-def]
    """In a subprocess: the audit hook is process-wide and cannot be removed; it refuses only while a sweep's
    allow-list is in force, and the process connects as before once it is not."""
    code = f"""
import socket, httpx
from offline_eval.runtime.netguard import allow_only, ConnectionNotAllowed
with allow_only(["{vllm_server.url}"]):
    assert httpx.get("{vllm_server.url}/models", trust_env=False).status_code == 200
    for host in ("127.0.0.2", "10.255.255.1"):
        try:
            socket.create_connection((host, {vllm_server.port}), timeout=2)
        except ConnectionNotAllowed as e:
            print("refused", host)
try:
    socket.create_connection(("127.0.0.2", {vllm_server.port}), timeout=2).close()
    print("connected after")
except ConnectionNotAllowed:
    print("still refused after")
except OSError:
    print("connected after")  # nothing listens there: the kernel refused, not the hook
"""
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.split("\n")[:3] == ["refused 127.0.0.2", "refused 10.255.255.1", "connected after"]


def test_dry_run_counts_chat_prompts_with_the_local_tokenizer(llamacpp_server, tiny, tmp_path):  # type: ignore[no-untyped-def]
    """llama.cpp's /tokenize takes text only: chat prompts are counted with `tokenizer` (the served GGUF),
    and then equal the in-process engine's counts on the same file."""
    import re

    gguf = str(tiny / "gguf" / "tiny-q8_0.gguf")
    models = [
        served("plain", llamacpp_server),
        served("tok", llamacpp_server, tokenizer=gguf),
        {"name": "local", "backend": "llamacpp", "path": gguf, "max_model_len": 2048},
    ]
    lines: list[str] = []
    run_sweep(
        load_config(_config(tmp_path, models, ["constrained"])),
        SweepOptions(source="models.yaml", dry_run=True, log=lines.append),
    )
    text = "\n".join(lines[:-1])
    counts = re.findall(r"requests, (\d+) prompt tokens,", text)  # tok, then local
    assert text.count("prompt tokens not countable locally") == 1, lines  # plain
    assert len(counts) == 2 and counts[0] == counts[1] and int(counts[0]) > 0, lines


def test_api_key_goes_in_the_header_and_nowhere_else(tiny, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    from offline_eval.runtime.errors import EngineError

    key = "sk-offline-eval-test-7f3a9c"
    server = Server("llamacpp", tiny, args=["--api_key", key])
    try:
        monkeypatch.setenv("OFFLINE_EVAL_TEST_KEY", key)
        cfg = load_config(
            _config(tmp_path, [served("k", server, api_key_env="OFFLINE_EVAL_TEST_KEY")], ["constrained"])
        )
        summary = run_sweep(cfg, SweepOptions(source="models.yaml", progress=False, log=lambda m: None)).to_json()
        assert not summary["failures"] and summary["runs"][0]["n_items"] == 26
        written = [p for p in Path(cfg.output_dir).rglob("*") if p.is_file()]
        assert written and not [p for p in written if key.encode() in p.read_bytes()]
        monkeypatch.setenv("OFFLINE_EVAL_TEST_KEY", "wrong")
        (tmp_path / "wrong").mkdir()
        with pytest.raises(EngineError, match=r"refused the API key \(HTTP 401: .*OFFLINE_EVAL_TEST_KEY"):
            _runner(server, tmp_path / "wrong", api_key_env="OFFLINE_EVAL_TEST_KEY")[1].get()
    finally:
        server.stop()


def test_a_4xx_fails_its_request_once_with_the_servers_message_and_stores_nothing(llamacpp_server, tmp_path):  # type: ignore[no-untyped-def]
    """A prompt longer than the server's context: llama-cpp-python answers 400; one request, no retries, and no
    answer is made of the refusal (a re-run asks again)."""
    from offline_eval.runtime.errors import PartialFailure

    runner, engine = _runner(llamacpp_server, tmp_path, retries=3)
    backend = engine.get()
    sent = []
    real = backend.client.http.stream
    backend.client.http.stream = lambda *a, **k: sent.append(a[1]) or real(*a, **k)
    with pytest.raises(PartialFailure, match=r"1 of 1 requests got no answer: .* refused it \(HTTP 400: ") as e:
        backend.generate([Request.chat([{"role": "user", "content": "第一条 " * 3000}], Sampling(max_tokens=4))])
    engine.close()
    assert sent == [llamacpp_server.url + "/chat/completions"]
    assert "maximum context length is 2048 tokens" in str(e.value) and e.value.done == {}


def test_a_whole_sweep_connects_only_to_its_server(llamacpp_server, tmp_path):  # type: ignore[no-untyped-def]
    """A served-model sweep in a subprocess (the audit hook is process-wide): while it runs, the process reaches
    only the config's host (probed from the sweep's own log callback); once it has ended, the process connects as
    before (a notebook goes on working)."""
    cfg = _config(tmp_path, [served("s", llamacpp_server)], ["constrained"])
    code = f"""
import socket
import offline_eval

def log(line):
    if line.startswith("[1/1]"):
        try:
            socket.create_connection(("127.0.0.2", {llamacpp_server.port}), timeout=2)
        except ConnectionRefusedError as e:
            print("during the sweep:", type(e).__name__)

offline_eval.sweep({str(cfg)!r}, limit=4, progress=False, log=log)
"""
    lines = _then_probe(code, llamacpp_server.port)
    assert lines[-3:] == ["during the sweep: ConnectionNotAllowed", "127.0.0.1 reachable", "ConnectionRefusedError"]
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert summary["runs"][0]["n_items"] == 4


def test_a_ray_worker_serving_a_model_connects_only_to_its_server(llamacpp_server):  # type: ignore[no-untyped-def]
    """Under --ray the served model's requests leave from a Ray worker: the replica there installs the same
    allow-list before it loads the engine, and lifts it when it closes (in a subprocess: the audit hook is
    process-wide)."""
    model = served("s", llamacpp_server)
    code = f"""
import socket
from offline_eval.models.spec import ModelSpec
from offline_eval.pipeline.executors.remote_backend import EngineReplica, unwrap
replica = EngineReplica(ModelSpec.model_validate({model!r}).load_spec("default"))
print(unwrap(replica.load())["max_model_len"])
try:
    socket.create_connection(("127.0.0.2", {llamacpp_server.port}), timeout=2)
except ConnectionRefusedError as e:
    print("while loaded:", type(e).__name__)
replica.close()
"""
    lines = _then_probe(code, llamacpp_server.port)
    assert lines[-4:] == ["2048", "while loaded: ConnectionNotAllowed", "127.0.0.1 reachable", "ConnectionRefusedError"]


def _then_probe(code: str, port: int) -> list[str]:
    """Run `code` in a fresh interpreter (the audit hook is process-wide), then connect to the server's host and
    to another one (where nothing listens: the kernel refuses it, unless the hook does first); the printed
    lines."""
    probe = f"""
import socket
socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
print("127.0.0.1 reachable")
try:
    socket.create_connection(("127.0.0.2", {port}), timeout=2)
except ConnectionRefusedError as e:
    print(type(e).__name__)
"""
    p = subprocess.run(
        [sys.executable, "-c", code + probe],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.splitlines()
