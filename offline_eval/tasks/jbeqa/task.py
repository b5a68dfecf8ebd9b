"""JBE-QA: true/false statements from the Japanese bar exam (民法, 刑法, 憲法), zero- and few-shot.

Two protocols (tasks/kit/protocol.py). `paper`: the authors' system prompt and user message (prompts.py, authors.py),
every split of the release but the four exemplars, their exemplars (rows of the release's train split), and free
answers of up to 1,000 tokens. `offline-eval`: our own prompt, the test split, exemplars chosen by id. Under both,
anything but a bare 1 or 0 is scored as 0 (false), as the paper does, faithfulness is the share of bare 1/0
answers, and F1 takes "true" as the positive class. The `constrained` and `logprob` modes are ours under either
protocol; `free` is the paper's.

Records are read in the public release's own form (`year` an era year such as 平成27年 or 令和５年, English
`subject`, `label` Y/N agreeing with the boolean `answer`) or with `year` already a Gregorian integer; per-year
results are keyed by the Gregorian year either way.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

from offline_eval.metrics.classification import precision_recall_f1
from offline_eval.metrics.values import N_UNCLUSTERED
from offline_eval.models.thinking import ReasoningPreset
from offline_eval.runtime.i18n import N_, kept
from offline_eval.tasks.base import Metric, Setting, Task
from offline_eval.tasks.kit import (
    DEFAULT_PROTOCOL,
    MAX_BOOTSTRAP,
    Bootstrapped,
    Breakdown,
    Choice,
    InputError,
    Phase,
    Protocol,
    Request,
    Result,
    RunMetrics,
    Sampling,
    Unset,
    has_split,
    protocol_field,
    resolve_split,
)

from . import authors
from .data import JBEQAItem, choose_exemplars, load_items, question_of
from .prompts import OURS_SYSTEM_PROMPT, message, paper_instruction, system_prompt, user_message
from .records import JBEQARecord
from .report import JBEQAReport
from .values import ANSWERED_TRUE, COUNTS, PRECISION, RECALL

SYSTEM_PROMPT = OURS_SYSTEM_PROMPT  # offline-eval's; the paper's is authors.SYSTEM_PROMPT
SPLITS = ("train", "validation", "test")  # `split: all`, in the order the authors' code runs them
LABELS = ("0", "1")
# Where a paper-labelled setting departs from the paper (departures()), as summary.json stores it.
MODE = kept("{mode} mode (ours; the paper's answers are free)")
SPLIT = kept("the {split} split only (the paper scores every split)")
NO_EXEMPLARS = kept(
    "no exemplar rows left unscored (this data is not the release's {split} split: the paper leaves out its rows "
    "{rows})"
)
BY_ID = kept("exemplars chosen by id (the paper's are train rows {rows})")
SHOTS = kept("{shots} shots (the paper's: 0 and {paper})")
ANSWERS_CUT = kept("answers cut at {tokens} tokens (the paper's {paper})")
STOPS = kept("answers end at {stops} (the paper's run to their cap)")
Mode = Literal["constrained", "free", "logprob"]


class JBEQAOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: str = Field(description="JSONL/Parquet file, a folder of {split}.jsonl|.parquet, or a datasets folder")
    protocol: Protocol = protocol_field("paper: the authors' protocol; offline-eval: ours (docs/tasks/jbeqa.md)")
    split: str = Field("test", description="the split scored; `all`: every split (default: paper all, ours test)")
    train_split: str = "train"
    shots: list[StrictInt] = Field(default_factory=lambda: [0], min_length=1)
    mode: list[Mode] = Field(
        default_factory=lambda: list[Mode](["constrained"]),
        min_length=1,
        description="default: paper free, ours constrained",
    )
    limit: StrictInt | None = Field(None, ge=1)
    overflow: Literal["skip", "fail"] = "skip"
    exemplar_ids: list[str] | None = None
    max_tokens: StrictInt | None = Field(None, ge=1, description="default: 4 constrained; free 1000 (paper), 32 (ours)")
    stop: list[Annotated[str, Field(min_length=1)]] = Field(
        default_factory=list, description="free answers end before the first of these (default: none, as the paper)"
    )
    bootstrap: StrictInt = Field(1000, ge=0, le=MAX_BOOTSTRAP)
    seed: int = 0

    @model_validator(mode="before")
    @classmethod
    def _defaults_of_protocol(cls, data: Any) -> Any:
        """The paper scores every split but the exemplars, from free answers; ours, the test split, constrained."""
        if isinstance(data, dict) and data.get("protocol", DEFAULT_PROTOCOL) == "paper":
            return {"split": "all", "mode": ["free"], **data}
        return data

    @field_validator("shots", "mode", mode="before")
    @classmethod
    def _listify(cls, v: Any) -> Any:
        return v if isinstance(v, list) else [v]

    @field_validator("shots")
    @classmethod
    def _shots(cls, v: list[int]) -> list[int]:
        if any(k < 0 for k in v):
            raise ValueError("shots must be >= 0")
        return v

    @model_validator(mode="after")
    def _paper_shots(self) -> JBEQAOptions:
        if self.protocol == "paper" and not self.exemplar_ids and max(self.shots) > len(authors.EXEMPLAR_ROWS):
            raise ValueError(
                f"the paper's protocol has {len(authors.EXEMPLAR_ROWS)} exemplars: shots up to "
                f"{len(authors.EXEMPLAR_ROWS)}, or give exemplar_ids"
            )
        return self


# Correctness as the paper scores it: the answer given (anything but a bare 1 is 0) against the label.
_CORRECT = Bootstrapped.mean(lambda r: None if r.skipped else float(r.scores["correct"]))


def parse_answer(text: str) -> int | None:
    t = text.strip()
    return int(t) if t in LABELS else None


class JBEQATask(Task[JBEQAItem, JBEQARecord]):
    name = "jbeqa"
    title = "JBE-QA"
    clusters = N_(
        "the exam question, parsed from the release's id, e.g. 令和５年-民法-１８-１ is statement 1 of question 18"
    )
    Options = JBEQAOptions
    Record = JBEQARecord
    report_parts = JBEQAReport
    primary_metric = "f1"
    counts = COUNTS
    paired_metric = "accuracy"  # an item's score is its correctness: F1 has no per-item value
    metrics = (
        Metric("f1", "F1", ci=Bootstrapped.f1(lambda r: bool(r.gold), lambda r: bool(r.pred))),
        Metric("accuracy", N_("accuracy"), ci=_CORRECT, margin=0.02, bounds=(0.0, 1.0), paired="binary"),
        Metric("faithfulness", N_("faithfulness")),
        Metric("parse_failures", N_("parse failures"), False),
        Metric("n_skipped", N_("skipped (overflow)"), False),
        Metric("n_scored", N_("scored")),
    )
    breakdowns = (
        Breakdown("subject", "f1", lambda r: r.subject, counts=True),
        Breakdown("year", "accuracy", lambda r: r.year),
    )
    leaderboard_note = N_(
        "F1 takes 'true' as the positive class. Non-binary answers count as 0 (false), as in the "
        "paper. Faithfulness is the share of answers that were a bare 1 or 0."
    )
    options: JBEQAOptions

    def settings(self) -> list[Setting]:
        return [{"shots": k, "mode": m} for k in self.options.shots for m in self.options.mode]

    def setting_name(self, setting: Setting) -> str:
        return f"jbeqa.{setting['shots']}shot.{setting['mode']}"

    @cached_property
    def exemplars(self) -> list[JBEQAItem]:
        """The few-shot exemplars, in the order they are shown, and never scored in any setting. Under the paper's
        protocol: rows 113, 1285, 1628 and 2609 of the release's train split (authors.py), wherever they are
        needed (shots, or the train split scored); otherwise enough for the most shots asked for, from the train
        split where the data has one, else from the scored split (none at 0 shots). `exemplar_ids` chooses them by
        id under either protocol. Read on first use, by load, build or prompt_template in any order."""
        o = self.options
        k = max(o.shots)
        if o.protocol == "paper" and not o.exemplar_ids:
            return self._paper_exemplars(k)
        if not k:
            return []
        separate = o.train_split != o.split and has_split(o.data, o.train_split)
        pool = self._items(o.train_split) if separate else self._scored()
        return choose_exemplars(pool, k, o.exemplar_ids, o.data)

    def _paper_exemplars(self, k: int) -> list[JBEQAItem]:
        o = self.options
        scores_train = o.split in ("all", o.train_split)
        if not k and not (scores_train and has_split(o.data, o.train_split)):
            return []
        rows = authors.EXEMPLAR_ROWS
        where = f"tasks.jbeqa.data ({o.train_split} split)"
        if not Path(o.data).is_dir() or not has_split(o.data, o.train_split):
            if not k:
                return []  # at 0 shots none is shown: the departure says none was left unscored
            raise InputError(
                f"the paper's exemplars are rows {', '.join(map(str, rows))} of the release's {o.train_split} split, "
                f"and this data has none: give exemplar_ids, or protocol: offline-eval",
                file=o.data,
                field=where,
            )
        pool = self._items(o.train_split)
        if len(pool) <= max(rows):
            if not k:
                return []  # not the release (Task.departures says so): at 0 shots the exemplars are only left unscored
            raise InputError(
                f"the paper's exemplars are rows {', '.join(map(str, rows))} of the {o.train_split} split of "
                f"{authors.DATASET} at revision {authors.DATASET_REVISION[:8]}, and this {o.train_split} split has "
                f"{len(pool)} rows: it is not that release; give exemplar_ids, or protocol: offline-eval",
                file=o.data,
                field=where,
            )
        return [pool[i] for i in rows]

    def _items(self, split: str) -> list[JBEQAItem]:
        items = load_items(self.options.data, split)
        if self.options.protocol == "paper":
            for it in items:
                if paper_instruction(it.instruction) is None:
                    raise InputError(
                        f"instruction {it.instruction!r} is not in the authors' table of "
                        f"{len(authors.INSTRUCTIONS)} instructions ({authors.INSTRUCTIONS_SOURCE}), so the paper's "
                        "prompt for it is unknown; with protocol: offline-eval it is sent as it is",
                        file=str(resolve_split(self.options.data, split)),
                        record=f"id {it.id}",
                        field="instruction",
                    )
        return items

    def _scored(self) -> list[JBEQAItem]:
        """The scored split's items; `all`: every split the data holds, in the order train, validation, test (a
        single file is its one split)."""
        o = self.options
        if o.split != "all":
            return self._items(o.split)
        if not Path(o.data).is_dir():
            return self._items("test")  # a single file: its one split, whatever it is named
        splits = [s for s in SPLITS if has_split(o.data, s)]
        if not splits:
            raise InputError(f"split: all found none of {', '.join(SPLITS)} here", file=o.data, field="split")
        out: list[JBEQAItem] = []
        seen: dict[str, str] = {}
        for split in splits:
            for it in self._items(split):
                if it.id in seen:
                    raise InputError(
                        f"id {it.id!r} is in the {seen[it.id]} and the {split} splits",
                        file=o.data,
                        record=f"id {it.id}",
                        field="id",
                    )
                seen[it.id] = split
                out.append(it)
        return out

    def load(self) -> list[JBEQAItem]:
        o = self.options
        # Exemplars are never scored, in any setting, so 0-shot and k-shot score the same items.
        ex = {e.id for e in self.exemplars}
        items = [it for it in self._scored() if it.id not in ex]
        return items[: o.limit] if o.limit else items

    def departures(self, setting: Setting) -> tuple[str, ...]:
        o, mode = self.options, setting["mode"]
        if o.protocol != "paper":
            return ()
        out = list(super().departures(setting))
        if mode != "free":
            out.append(MODE.format(mode=mode))
        if o.split != "all":
            out.append(SPLIT.format(split=o.split))
        if not o.exemplar_ids and not self.exemplars and o.split in ("all", o.train_split):
            out.append(NO_EXEMPLARS.format(split=o.train_split, rows=", ".join(map(str, authors.EXEMPLAR_ROWS))))
        if o.exemplar_ids and (setting["shots"] or o.split in ("all", o.train_split)):
            out.append(BY_ID.format(rows=", ".join(map(str, authors.EXEMPLAR_ROWS))))
        if setting["shots"] not in (0, len(authors.EXEMPLAR_ROWS)):
            out.append(SHOTS.format(shots=setting["shots"], paper=len(authors.EXEMPLAR_ROWS)))
        if mode == "free" and self._max_tokens(mode) != authors.MAX_NEW_TOKENS:
            out.append(ANSWERS_CUT.format(tokens=self._max_tokens(mode), paper=authors.MAX_NEW_TOKENS))
        if mode == "free" and o.stop:
            out.append(STOPS.format(stops=" or ".join(map(repr, o.stop))))
        return tuple(out)

    @property
    def reasoning_preset(self) -> ReasoningPreset | None:
        """Under paper, a model that thinks runs as the paper ran its reasoning models (authors.REASONING)."""
        if self.options.protocol != "paper":
            return None
        return ReasoningPreset(**authors.REASONING, source=str(authors.DECODING_SOURCE))  # type: ignore[arg-type]

    def _max_tokens(self, mode: str) -> int:
        if self.options.max_tokens:
            return self.options.max_tokens
        if mode != "free":
            return 4
        return authors.MAX_NEW_TOKENS if self.options.protocol == "paper" else 32

    def build(self, items: Sequence[JBEQAItem], setting: Setting) -> Phase:
        mode, k = setting["mode"], setting["shots"]
        shots: list[dict[str, str]] = []
        protocol = self.options.protocol
        for e in self.exemplars[:k] if k else []:
            shots += [
                {"role": "user", "content": message(e, protocol)},
                {"role": "assistant", "content": "1" if e.answer else "0"},
            ]
        sampling = Sampling(
            temperature=0.0,
            seed=self.options.seed,
            max_tokens=self._max_tokens(mode),
            stop=tuple(self.options.stop) if mode == "free" else (),
        )
        constraint = Choice(list(LABELS)) if mode == "constrained" else None
        reqs = [
            Request.chat(
                [
                    {"role": "system", "content": system_prompt(protocol)},
                    *shots,
                    {"role": "user", "content": message(it, protocol)},
                ],
                sampling,
                constraint,
                shared_chars=0,  # the system prompt and the exemplars are the same for every item
            )
            for it in items
        ]
        return Phase(
            name=self.setting_name(setting),
            requests=reqs,
            item_ids=[it.id for it in items],
            method="choice_logprobs" if mode == "logprob" else "generate",
            choices=LABELS if mode == "logprob" else None,
            overflow=self.options.overflow,
        )

    def score(self, item: JBEQAItem, result: Result, setting: Setting) -> JBEQARecord:
        rec = JBEQARecord(
            id=item.id,
            subject=item.subject_jp,
            year=item.year_ad,
            output=result.text,
            finish_reason=result.finish_reason,
            gold=int(item.answer),
            parsed=None,
        )
        if result.finish_reason == "overflow":
            rec.skipped = True
            return rec
        rec.parsed = parse_answer(result.text) if result.answered else None
        pred = rec.parsed == 1  # the paper scores anything but a bare answer as 0
        rec.pred = int(pred)
        rec.scores = {"correct": int(pred == item.answer)}
        if setting["mode"] != "logprob":
            rec.scores["faithful"] = int(rec.parsed is not None)
        rec.prompt_tokens, rec.output_tokens = result.prompt_tokens, result.output_tokens
        if result.logprobs is not None:
            rec.logprobs = {k: round(v, 6) for k, v in result.logprobs.items()}
        return rec

    def aggregate(self, records: Sequence[JBEQARecord], setting: Setting) -> RunMetrics:
        scored = [r for r in records if not r.skipped]
        gold = [bool(r.gold) for r in scored]
        pred = [bool(r.pred) for r in scored]
        m = RunMetrics()
        m.update(
            {
                "n_scored": len(scored),
                "n_skipped": len(records) - len(scored),
                "parse_failures": sum(1 for r in scored if r.parsed is None),
            }
        )
        if not scored:  # no score at all, not a score of 0: such a run ranks last as "no items"
            m.update({"accuracy": None, "f1": None, PRECISION.name: None, RECALL.name: None})
            if setting["mode"] != "logprob":
                m.put("faithfulness", None)
            return m
        p, r_, _ = precision_recall_f1(gold, pred)
        m.update({PRECISION.name: _r(p), RECALL.name: _r(r_)})  # F1 and accuracy: from their declarations
        m.put(ANSWERED_TRUE.name, _r(sum(pred) / len(pred)))
        if setting["mode"] != "logprob":
            m.put("faithfulness", _r(sum(r.scores["faithful"] for r in scored) / len(scored)))
        m.put(N_UNCLUSTERED.name, sum(1 for r in scored if self.cluster_of(r) is None))
        return m

    @classmethod
    def cluster(cls, record: JBEQARecord) -> str | None:
        """The exam question: its statements share a lead-in and a theme, so their answers are correlated."""
        return question_of(record.id)

    def prompt_template(self, setting: Setting) -> str:
        """The system prompt, the user message with the release's field names in place of their values, and the
        exemplars the setting's shots put before it."""
        placeholders = JBEQAItem(
            id="{id}",
            year=2024,
            subject="{subject}",
            label="Y",
            answer=True,
            subject_jp="{subject_jp}",
            theme="{theme}",
            lead_in="{lead_in}",
            instruction="{instruction}",
            question="{question}",
            remark="{remark}",
        )
        shots = [e.id for e in self.exemplars[: setting["shots"]]] if setting["shots"] else []
        if self.options.protocol == "paper":
            user = "\n".join(
                ["科目：{subject_jp}", "{theme}について", "{lead_in}", "{instruction}", "{question}", "なお、{remark}"]
            )
            table = "\n".join(f"{k} -> {v}" for k, v in authors.INSTRUCTIONS.items())
            return "\n\n".join([authors.SYSTEM_PROMPT, user, table, f"exemplars: {', '.join(shots)}"])
        return "\n\n".join([SYSTEM_PROMPT, user_message(placeholders), f"exemplars: {', '.join(shots)}"])

    def item_answer(self, record: JBEQARecord) -> Any:
        if record.skipped:
            return None
        return "unparsed" if record.parsed is None else int(record.parsed)

    def item_probability(self, record: JBEQARecord) -> float | None:
        lp = record.logprobs
        if record.skipped or isinstance(lp, Unset) or not lp or "1" not in lp or "0" not in lp:
            return None
        hi = max(lp["0"], lp["1"])
        e0, e1 = math.exp(lp["0"] - hi), math.exp(lp["1"] - hi)
        return e1 / (e0 + e1)

    def validate_data(self, path: str) -> str:
        """The scored split is required, as in a sweep; the exemplar split is checked when present."""
        o = self.options.model_copy(update={"data": path})
        task = type(self)(o)
        found = [f"{o.split}: {len(task._scored())} items"]
        if o.train_split != o.split and has_split(path, o.train_split):
            found.append(f"{o.train_split}: {len(task._items(o.train_split))} items")
        return "; ".join(found)


def _r(x: float) -> float:
    return round(x, 6)
