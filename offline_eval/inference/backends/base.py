"""The backend protocol, and what every engine shares: encoding with carried ids, the ids a later phase continues
from, choice tokens, weights' identity."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from offline_eval.inference.backends.spec import LoadSpec, PromptCount, PromptCounter, Reservation
from offline_eval.inference.constrained.grammars import compiled_text
from offline_eval.inference.constraints import Constraint
from offline_eval.inference.requests import Request, Result
from offline_eval.modelfiles.fingerprint import HashCache, files_fingerprint
from offline_eval.runtime.errors import EngineError, InputError

if TYPE_CHECKING:
    from offline_eval.modelfiles.peft import PeftAdapter

Progress = Callable[[int], None] | None


class NonFiniteLogits(EngineError):
    """The model's logits were NaN or +inf (-inf only rules a token out): whatever it decoded is noise, even where
    a grammar made it parse. Nothing of the call is stored, the run fails, and its engine serves no other run."""

    def __init__(self, engine: str) -> None:
        super().__init__(
            f"{engine}: the model's logits were NaN or infinite, so its answers are noise and none is stored: the "
            "weights or the adapter diverged (an adapter trained too hot, or too large an adapter_scale)"
        )


def finite_logprobs(engine: str, values: Any) -> None:
    """Raises NonFiniteLogits where a choice's log-probability is NaN or +inf."""
    if any(v != v or v == float("inf") for v in values):
        raise NonFiniteLogits(engine)


class Backend(ABC):
    """The engine contract: generate, choice_logprobs and close. Tokenization is a separate capability
    (TokenizingBackend): an engine without a local tokenizer (a server) still fits."""

    name: str = "base"
    # Load options this engine sets where its library's default differs and the user did not set them; they can
    # change outputs, so they are part of the store key.
    load_defaults: ClassVar[dict[str, Any]] = {}
    # How many sequences the engine's prefix cache keeps (None: as many as its memory holds). An engine that keeps
    # one (llama.cpp) answers each item right after its thinking, so the answer reuses the thinking's cache.
    cached_sequences: ClassVar[int | None] = None
    # An engine that pads each batch to its longest prompt and caches no prefix (transformers) is handed its
    # prompts shortest first, so a batch pads least; the others get them by token ids, neighbours sharing a prefix.
    batches_by_length: ClassVar[bool] = False
    # An engine that chooses how to start from the work planned on the load (vLLM: compiled or eager) is handed
    # its prompt tokens in LoadSpec.planned_prompt_tokens; they are counted only for such an engine.
    plans_start: ClassVar[bool] = False
    # An engine that serves several LoRA adapters over one loaded base, one after another (use_adapter): the
    # adapter variants of one base are then one engine load (pool.py).
    swaps_adapters: ClassVar[bool] = False
    # Prompts encoded as another engine would, without its weights (a served model's local `tokenizer:` file is read
    # by the engine that reads such files). The registry sets it, so that no engine imports another.
    counter_of: ClassVar[staticmethod[[LoadSpec], PromptCounter | None]]

    def __init__(self, spec: LoadSpec) -> None:
        self.spec = spec
        self.max_model_len = spec.max_model_len
        self.prompt_count: PromptCount | None = None  # None: this engine cannot say what its cache saved

    @abstractmethod
    def generate(
        self, requests: Sequence[Request], encoded: Sequence[list[int]] | None = None, progress: Progress = None
    ) -> list[Result]: ...

    @abstractmethod
    def choice_logprobs(
        self,
        requests: Sequence[Request],
        choices: Sequence[str],
        encoded: Sequence[list[int]] | None = None,
        progress: Progress = None,
    ) -> list[Result]:
        """One forward pass per prompt; Result.logprobs maps each choice to the log-probability of its
        first token as the next token, and Result.text is the most likely choice."""

    @classmethod
    def prompt_counter(cls, spec: LoadSpec) -> PromptCounter | None:
        """Something that encodes prompts as this engine would, without loading the model (for the dry-run
        planner); None: prompts cannot be counted locally."""
        return None

    @classmethod
    def reservation(cls, spec: LoadSpec) -> Reservation:
        """CPU cores from `threads`; no GPU unless the engine says otherwise."""
        return Reservation(cpus=spec.threads or 1)

    @classmethod
    def peft_problem(cls, adapter: PeftAdapter) -> str | None:
        """Why this engine cannot hold a PEFT adapter that fits its base (None: it can)."""
        return None

    @classmethod
    def load_quantization_problem(cls, quantization: str) -> str | None:
        """Why this engine cannot quantize unquantized weights as `quantization` while it loads them (None: it
        can, or its library says why in one line itself)."""
        return None

    @classmethod
    def constraint_text(cls, c: Constraint, library: str | None) -> str | None:
        """The text this engine's constraint library (`library`, auto resolved) compiles `c` from: its digest keys
        the constrained outputs in the store (None: no converter of ours is involved)."""
        return compiled_text(c, library)

    @classmethod
    def weights_identity(cls, spec: LoadSpec, cache: HashCache | None = None) -> dict[str, Any]:
        """What identifies the weights in the store key: by default every weights file's sha256."""
        return {"files": files_fingerprint(spec.path, cache)}

    def engine_start(self) -> dict[str, Any] | None:
        """What the engine's start did that the provenance records (e.g. vLLM: compiled, or reused its compile
        cache); None: nothing to say."""
        return None

    def use_adapter(self, adapter: str, scale: float) -> None:
        """Serve `adapter` from now on, on the weights already loaded (only where swaps_adapters)."""
        raise NotImplementedError(f"{self.name} loads one adapter per engine")

    def start_line(self) -> str | None:
        """How the engine started, for the sweep's log (None: nothing to say)."""
        return None

    def prompt_lengths(self, requests: Sequence[Request]) -> list[int] | None:
        """Prompt token counts where the engine can give them without local ids (None: it enforces its
        context itself). A TokenizingBackend's runner uses encode() instead."""
        return None

    def close(self) -> None:  # noqa: B027 - optional for engines with nothing to free
        pass

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class TokenizingBackend(Backend):
    """An engine with a local tokenizer: the runner encodes each prompt once, to check that it fits the
    context, and hands the ids back to generate()."""

    @abstractmethod
    def encode(self, requests: Sequence[Request]) -> list[list[int]]:
        """Render each request (chat template or raw prompt) into prompt token ids."""

    @abstractmethod
    def render(self, request: Request) -> str:
        """The prompt text: the chat template applied (with the generation prompt), or the raw prompt."""

    @abstractmethod
    def encode_text(self, text: str) -> list[int]:
        """Token ids of rendered text, special tokens parsed, none added."""

    @abstractmethod
    def vocab_bytes(self) -> Sequence[bytes]:
        """Each token's exact bytes."""

    def spelling(self, want: bytes) -> list[int]:
        """The ids of every token whose bytes are exactly `want`."""
        return [i for i, b in enumerate(self.vocab_bytes()) if b == want]

    def label_token_ids(self, request: Request, choices: Sequence[str]) -> list[list[int]]:
        cache: dict[tuple[str, ...], list[list[int]]] = self.__dict__.setdefault("_label_ids", {})
        key = tuple(choices)
        if key not in cache:
            cache[key] = choice_token_ids(self.encode_text, self.render(request), choices, self.spelling)
        return cache[key]


def carried_ids(
    full: str, r: Request, head: Callable[[str], list[int]], rest: Callable[[str], list[int]]
) -> list[int] | None:
    """The prompt `full` (rendered from r, its prefill at the end) as ids, with the carried part's own ids in place
    of its text: the text before it encoded as a prompt (`head`), the text after it without special tokens
    (`rest`). None: the request carries nothing, or the rendered text does not hold it where it says."""
    c = r.carried
    if c is None:
        return None
    start = len(full) - len(r.prefill or "") + c.at
    if start < 0 or full[start : start + len(c.text)] != c.text:
        return None
    return head(full[:start]) + list(c.ids) + (rest(tail) if (tail := full[start + len(c.text) :]) else [])


def faithful_ids(
    ids: Sequence[int],
    text: str,
    decode: Callable[[Sequence[int]], str],
    stop: Sequence[str] = (),
    stopped: bool = False,
) -> tuple[int, ...] | None:
    """The generated `ids` a later phase continues from: those that decode to `text` exactly (all of them, or all
    but the few, at most STOP_TOKENS, that spelled the stop string the text was cut at). Where none do (the engine
    writes bytes that are not UTF-8 its own way), all of them if no stop string ended the generation: they are
    the model's own tokens, which its text only approximates. None: a stop string ended it and no start of the ids
    spells the text, so where the thinking ends among them is unknown. `stopped`: a stop ended the generation, so
    the fewest ids that spell the text: a special token that ended it (an end of generation, gpt-oss's <|end|>)
    decodes to nothing and is not the thinking's."""
    window = range(len(ids), max(len(ids) - STOP_TOKENS, 0) - 1, -1)
    for n in reversed(window) if stopped else window:
        if decode(ids[:n]) == text:
            return tuple(ids[:n])
    full = decode(ids)
    # a stop ended it (a special token the text leaves out among them) and no start of the ids spells the text:
    # where the thinking ends among them is unknown
    return None if stopped or any(x and x in full for x in stop) else tuple(ids)


STOP_TOKENS = 16


def choice_token_ids(
    encode_text: Callable[[str], list[int]],
    prefix: str,
    choices: Sequence[str],
    spelling: Callable[[bytes], list[int]],
) -> list[list[int]]:
    """For each choice, the next-token ids that score it in logprob mode.

    A choice that is one token in context is scored by every token whose bytes spell it exactly (byte
    fallback gives "1" both a piece and a <0x31> token; constrained decoding may emit either), so logprob
    mode and constrained greedy decoding rank the labels alike. A longer choice is scored by its first token.
    """
    base = encode_text(prefix)
    ids: list[list[int]] = []
    for c in choices:
        full = encode_text(prefix + c)
        if full[: len(base)] != base or len(full) == len(base):
            raise InputError(f"cannot find the token for choice {c!r} after the chat template")
        if len(full) == len(base) + 1:
            ids.append(sorted(set(spelling(c.encode("utf-8"))) | {full[len(base)]}))
        else:
            ids.append([full[len(base)]])
    flat = [i for group in ids for i in group]
    if len(set(flat)) != len(flat):
        raise InputError(f"choices {list(choices)} share a first token; logprob mode needs distinct ones")
    return ids


def _byte_level(b: int) -> str:
    """GPT-2's byte-level BPE character for byte `b` (printable Latin-1 as itself, the rest shifted past 255)."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    return chr(b) if b in keep else chr(256 + sorted(set(range(256)) - set(keep)).index(b))


def hf_spelling(vocab: dict[str, int], want: bytes) -> list[int]:
    """HFTokenized.spelling: the ids of the tokens whose bytes are `want`, in `vocab` (the tokenizer's piece -> id),
    found by the forms a vocabulary writes them in. One with byte-fallback tokens (<0x0A>: SentencePiece) writes
    text as it is with ▁ for a space, and a byte as <0xNN>; one without (byte-level BPE, or raw) writes GPT-2's
    character for each byte, which is the text itself for printable ASCII."""
    text = want.decode("utf-8", errors="replace")
    if "<0x0A>" in vocab:
        forms = {text, text.replace(" ", "\u2581"), *([f"<0x{want[0]:02X}>"] if len(want) == 1 else [])}
    else:
        forms = {text, "".join(_byte_level(b) for b in want)}
    return sorted({vocab[f] for f in forms if f in vocab})


def hf_vocab_bytes(tokenizer: Any) -> list[bytes]:
    """Each token's exact bytes, as the grammar engine (xgrammar) sees them."""
    import xgrammar as xgr

    return list(xgr.TokenizerInfo.from_huggingface(tokenizer).decoded_vocab)


def logsumexp(values: Sequence[float]) -> float:
    import math

    m = max(values)
    return m + math.log(sum(math.exp(v - m) for v in values))


def check_engine_args(spec: LoadSpec, accepted: set[str] | None, reserved: dict[str, str]) -> None:
    """engine_args (and a variant's options) may not repeat a models.yaml key nor name an argument the
    engine does not have: engines ignore or misread both silently."""
    for key in spec.engine_args:
        field = f"engine_args.{key}"
        if key in reserved:
            raise InputError(
                f"set `{reserved[key]}` in models.yaml instead; offline-eval passes it to the "
                f"{spec.backend} engine itself",
                field=field,
            )
        if accepted is not None and key not in accepted:
            near = sorted(accepted, key=lambda a: _distance(a, key))[:3]
            raise InputError(
                f"the {spec.backend} engine has no argument '{key}' (closest: {', '.join(near)})", field=field
            )


def _distance(a: str, b: str) -> int:
    from rapidfuzz.distance import Levenshtein

    return int(Levenshtein.distance(a, b))


def signature_params(*fns: Callable[..., Any]) -> set[str]:
    import inspect

    return {
        p.name
        for fn in fns
        for p in inspect.signature(fn).parameters.values()
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and p.name != "self"
    }
