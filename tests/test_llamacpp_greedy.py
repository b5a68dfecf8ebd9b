"""llama.cpp greedy decoding that asks the grammar about one token at a time gives, token for token, what
llama-cpp-python's create_completion gives from an empty cache with the grammar over the whole vocabulary, though ours
reuses the cache from one request to the next: on the tiny random model
(whose best token the grammar refuses at most steps) and on Gemma 3 270M (whose best token it mostly allows)."""

from __future__ import annotations

import pytest
from conftest import ROOT, spec_for

from offline_eval.inference.backends.llamacpp.greedy import _ends_inside_utf8
from offline_eval.inference.backends.registry import load_backend
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.constraints import Choice, JsonSchema, Regex
from offline_eval.inference.requests import Request, Sampling

GEMMA_GGUF = ROOT / "models" / "gemma-3-270m" / "gguf" / "gemma-3-270m-q4_k_m.gguf"
JUDGE = JsonSchema(
    {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "minimum": 1, "maximum": 5},
            "reason": {"type": "string", "maxLength": 40},
        },
        "required": ["score", "reason"],
        "additionalProperties": False,
    }
)
# long enough (over 300 tokens) that every request after the first reuses batches of the one before
SYSTEM = (
    "あなたは日本の契約実務と民法に精通した評価者です。設問に対して、条文と判例に照らして簡潔に答えてください。" * 8
)
QUESTIONS = [
    "次の記述は正しいか。民法上、未成年者が法定代理人の同意を得ないでした法律行為は、取り消すことができる。",
    "次の記述は正しいか。契約の解除は、相手方に対する意思表示によってする。",
    "秘密保持契約の有効期間について、次の条項を評価してください：本契約の有効期間は締結日から一年間とする。",
]


def _requests() -> list[Request]:
    out = []
    for q in QUESTIONS:
        for constraint, n in (
            (Choice(["0", "1"]), 4),
            (Regex(r"[0-9]{1,3}(,[0-9]{1,3})*"), 12),
            (JUDGE, 48),
            (None, 24),
        ):
            out.append(
                Request.chat(
                    [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}],
                    Sampling(temperature=0.0, max_tokens=n),
                    constraint,
                )
            )
    return out


def _both_ways(spec: LoadSpec) -> tuple[list, list, tuple[int, int, int]]:
    """create_completion's answers, ours, and how ours chose: tokens asked about one at a time, steps whose best
    token was refused, and of those the ones that filtered the whole vocabulary."""
    reqs = _requests()
    backend = load_backend(spec)
    answers = {}
    try:
        backend.fast_greedy = False  # type: ignore[attr-defined]
        answers[False] = []
        for req in reqs:  # each from an empty cache: ours reuses the cache and must still give these answers
            backend.llm.reset()  # type: ignore[attr-defined]
            answers[False] += [(r.text, r.finish_reason, r.output_tokens) for r in backend.generate([req])]
        backend.fast_greedy = True  # type: ignore[attr-defined]
        count = backend.prompt_count
        assert count is not None
        submitted, computed = count.submitted, count.computed
        answers[True] = [(r.text, r.finish_reason, r.output_tokens) for r in backend.generate(reqs)]
        assert count.computed - computed < (count.submitted - submitted) / 2  # ours reused the cache
        checks = backend._checks.values()  # type: ignore[attr-defined]
        steps = sum(c.asked for c in checks), sum(c.filtered for c in checks), sum(c.filtered_all for c in checks)
        return answers[False], answers[True], steps
    finally:
        backend.close()


def test_the_tiny_model_answers_the_same_token_for_token(tiny):  # type: ignore[no-untyped-def]
    reference, ours, (asked, refused, filtered) = _both_ways(spec_for("llamacpp", tiny))
    assert ours == reference
    assert any(finish == "length" for _, finish, _ in ours)  # max_tokens reached on some
    assert 0 < filtered < refused < asked, (asked, refused, filtered)  # every way of choosing a token was taken


@pytest.mark.engine
def test_gemma_answers_the_same_token_for_token() -> None:
    if not GEMMA_GGUF.exists():
        pytest.skip("Gemma 3 270M is built by scripts/setup.sh")
    spec = LoadSpec(name="gemma", backend="llamacpp", path=str(GEMMA_GGUF), max_model_len=1024)
    reference, ours, (asked, refused, filtered) = _both_ways(spec)
    assert ours == reference
    assert any('"score"' in text for text, _, _ in ours)
    assert 0 < refused < asked, (asked, refused, filtered)


@pytest.mark.parametrize(
    ("text", "pending", "expected"),
    [
        ("abあ".encode(), 0, 0),  # a whole character
        ("abあ".encode()[:3], 0, 2),  # the first of three bytes: two more tokens may be needed
        ("abあ".encode()[:4], 0, 1),
        ("abé".encode()[:3], 0, 1),
        (b"abc", 1, 1),  # nothing new to hold back: the count carries on
        (b"\xe3", 0, 0),  # create_completion reads the last three bytes as if there were three
    ],
)
def test_a_token_that_ends_inside_a_character_is_held_back(text: bytes, pending: int, expected: int) -> None:
    assert _ends_inside_utf8(text, pending) == expected
