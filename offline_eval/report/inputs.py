"""What the item browser shows beside the results files, handed over by the sweep in memory: each setting's
prompt per item (the same for every run of the setting, so kept once), and the task's per-record views that
need the item (e.g. a revision's diff against the input contract). Prompt text is split into lines and each
distinct line is stored once: few-shot exemplars, a lead-in shared by a question's statements and shared
statute articles cost their length once."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from offline_eval.inference.requests import Phase, Request
from offline_eval.results.records import RunKey

# A prompt: [[role, line index, ...], ...]; a raw (non-chat) prompt has the role "prompt".
Prompt = list[list[Any]]
# A diff as the browser draws it: [[op, text], ...], op "=" kept, "+" inserted, "-" deleted, "…" elided.
Segments = list[list[str]]


@dataclass
class ItemInputs:
    texts: list[str] = field(default_factory=list)
    # setting -> item id -> [the prompt, the focused prompt (overflow policy 'focus') or None]
    prompts: dict[str, dict[str, list[Prompt | None]]] = field(default_factory=dict)
    # (run, setting) -> item id -> {label: Segments}
    diffs: dict[RunKey, dict[str, dict[str, Segments]]] = field(default_factory=dict)
    _index: dict[str, int] = field(default_factory=dict, repr=False)

    def _intern(self, text: str) -> int:
        i = self._index.get(text)
        if i is None:
            i = self._index[text] = len(self.texts)
            self.texts.append(text)
        return i

    def encode(self, request: Request) -> Prompt:
        msgs = request.messages if request.messages is not None else (("prompt", request.prompt or ""),)
        return [[role, *(self._intern(p) for p in content.split("\n"))] for role, content in msgs]

    def decode(self, prompt: Prompt) -> list[tuple[str, str]]:
        return [(m[0], "\n".join(self.texts[i] for i in m[1:])) for m in prompt]

    def add_phase(self, setting: str, ids: list[str], phase: Phase) -> None:
        """Each item's request (and its focused fallback) of the setting's phase, in item order."""
        fallbacks = phase.fallbacks or [None] * len(phase.requests)
        mine = self.prompts.setdefault(setting, {})
        for item_id, req, fb in zip(ids, phase.requests, fallbacks):
            mine[item_id] = [self.encode(req), self.encode(fb) if fb is not None else None]

    def add_diffs(self, key: RunKey, item_id: str, diffs: dict[str, Segments]) -> None:
        if diffs:
            self.diffs.setdefault(key, {})[item_id] = diffs
