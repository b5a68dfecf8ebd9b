"""LegalEval-Q as a task: candidates answer legal questions; after every candidate has run, one evaluation
model writes a Comment and a Conclusion for each answer; the regression scorer turns them into 0-100. Two
protocols (docs/tasks/legalevalq.md, Protocol): `paper`, the authors' prompts, parsing and decoding (authors.py),
and `offline-eval`, ours (Japanese prompts, a JSON or tag evaluator, greedy answers)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from offline_eval.metrics.adjscore import summarize
from offline_eval.models.spec import ModelSpec, one_load
from offline_eval.runtime.errors import is_url, missing
from offline_eval.runtime.i18n import N_, kept
from offline_eval.tasks.base import Setting, Task
from offline_eval.tasks.kit import (
    DEFAULT_PROTOCOL,
    MAX_BOOTSTRAP,
    N_SKIPPED,
    Evaluation,
    InputError,
    JsonSchema,
    Phase,
    Protocol,
    Records,
    Request,
    Result,
    RunEntry,
    RunMetrics,
    Sampling,
    note,
    output_key,
    protocol_field,
    shared_chars,
)
from offline_eval.tasks.kit.calibration import HUMAN_SAMPLE_HELP, HumanLabels, HumanSample, JudgedNumber

from . import annotate, authors
from . import evaluator as ev
from .commands import add_commands
from .data import LegalEvalQItem, load_annotated, load_queries, query_ids
from .human import human_labels, read_human_scores
from .records import LegalEvalQRecord
from .report import LegalEvalQReport
from .scorer import Scorer, scorer_files
from .values import (
    ADJ_SCORE,
    ADJ_SCORE_DELTA,
    COUNTS,
    EVALUATOR_PARSE_FAILURES,
    MEAN,
    MEAN_DELTA,
    MEDIAN,
    N_ANSWERS,
    N_EVALUATED,
    N_SCORED,
    STD,
    TRUNCATED_ANSWERS,
)

if TYPE_CHECKING:
    from offline_eval.tasks.kit import Case

# Where a paper-labelled run departs from the paper (departures()), as summary.json stores it.
ANSWERS_CUT = kept("answers cut at {tokens} tokens (the paper's {paper})")
CRITIQUES_CUT = kept("critiques cut at {tokens} tokens (the paper's {paper})")
EVALUATOR = kept(
    "the evaluator is {name} ({engine}, {path}; its weights' digest: provenance.loads), not known to be the authors' "
    "fine-tuned Qwen2.5-7B"
)
SCORER = kept(
    "the scorer is {scorer}, trained by `offline-eval legaleval-q train` (its files' digests: the setting's "
    "provenance), not the authors' released regression model"
)

ANSWER_SYSTEM = (
    "あなたは法律の専門家です。次の質問に、根拠となる法令を示しながら、正確で分かりやすく回答してください。"
    "質問が中国語の場合は中国語で回答してください。"
)


# What `protocol: paper` changes in the defaults: the authors' evaluator and their lengths (authors.py).
PAPER_DEFAULTS: dict[str, Any] = {
    "evaluator_mode": "authors",
    "max_tokens": authors.ANSWER_MAX_NEW_TOKENS,
    "evaluator_max_tokens": authors.EVALUATOR_MAX_NEW_TOKENS,
}


class LegalEvalQOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    protocol: Protocol = protocol_field("paper: the authors' protocol; offline-eval: ours (docs/tasks/legalevalq.md)")
    data: str = Field(description="JSON list of {query, resource, datasets_id, datasets_ans?}")
    validation_data: str | None = Field(
        None, description="a second query set: the report shows the train-vs-validation delta (the paper's Table 2)"
    )
    evaluator: Annotated[ModelSpec, AfterValidator(one_load)]
    evaluator_mode: Literal["json", "tags", "authors"] = Field(
        "json",
        description="json: {comment, conclusion} constrained; tags: <reasoning>/<ans>; authors: the authors' "
        "request and parsing (protocol: paper's, and its default)",
    )
    scorer: str = Field(description="a folder written by `offline-eval legaleval-q train`")
    limit: int | None = Field(None, ge=1)
    max_tokens: int = Field(512, ge=1, description="answer length (protocol: paper: 1024)")
    evaluator_max_tokens: int = Field(1024, ge=16, description="critique length (protocol: paper: 512)")
    comment_max_chars: int = Field(1200, ge=1, description="JSON mode: the longest critique the grammar allows")
    overflow: Literal["skip", "fail"] = "skip"
    bootstrap: int = Field(1000, ge=0, le=MAX_BOOTSTRAP, description="resamples for the 95% CIs (0 = off)")
    seed: int = 0
    human_scores: str | list[str] | None = Field(
        None,
        description="the annotation page's JSONL exports (or CSV/JSONL rows: item_id, model, score 0-100, "
        "annotator), to calibrate the scorer's mean (docs/calibration.md)",
    )
    human_sample: HumanSample | None = Field(None, description=HUMAN_SAMPLE_HELP)

    @model_validator(mode="before")
    @classmethod
    def _paper_defaults(cls, data: Any) -> Any:
        """protocol: paper fills in the authors' evaluator mode and lengths where the config gives
        none, and has an evaluator with local weights decode as they do (`sampling: model`: its generation_config)
        unless its own `sampling` says otherwise."""
        if not isinstance(data, dict) or data.get("protocol", DEFAULT_PROTOCOL) != "paper":
            return data
        data = {**PAPER_DEFAULTS, **data}
        e = data.get("evaluator")
        if isinstance(e, dict) and "sampling" not in e and e.get("path"):
            data["evaluator"] = {**e, "sampling": "model"}
        return data

    @field_validator("evaluator_mode")
    @classmethod
    def _mode_of_protocol(cls, v: str, info: ValidationInfo) -> str:
        if info.data.get("protocol") == "paper" and v != "authors":
            raise PydanticCustomError(
                "protocol",
                "'{mode}' is offline-eval's evaluator ({what}); protocol: paper runs the authors' (evaluator_mode: "
                "authors, with no JSON constraint): give protocol: offline-eval to run '{mode}'",
                {"mode": v, "what": "a JSON-constrained critique" if v == "json" else "our prompt, tags parsed"},
            )
        return v

    @field_validator("comment_max_chars")
    @classmethod
    def _json_only(cls, v: int, info: ValidationInfo) -> int:
        """A bound of the JSON constraint, refused with the authors' evaluator (the default, as a dump of the
        options holds it, changes nothing and is let through)."""
        if info.data.get("evaluator_mode") == "authors" and v != cls.model_fields["comment_max_chars"].default:
            raise PydanticCustomError(
                "protocol",
                "{v} bounds the JSON constraint of evaluator_mode: json; the authors' evaluator (evaluator_mode: "
                "authors, protocol: paper's) writes free text under no constraint: remove it, or give protocol: "
                "offline-eval",
                {"v": v},
            )
        return v


class LegalEvalQTask(Task[LegalEvalQItem, LegalEvalQRecord]):
    name = "legalevalq"
    title = "LegalEval-Q"
    clusters = N_("the question")
    Options = LegalEvalQOptions
    Record = LegalEvalQRecord
    annotation_form = annotate.FORM
    stratum_field = "split"
    options: LegalEvalQOptions
    report_parts = LegalEvalQReport
    primary_metric = ADJ_SCORE.name
    metrics = (ADJ_SCORE, MEAN)
    counts = COUNTS

    @classmethod
    def cluster(cls, record: LegalEvalQRecord) -> str | None:
        """The question: every candidate's answer to it shares its difficulty."""
        return record.query

    path_options = ("data", "validation_data", "scorer", "human_scores")
    model_options = ("evaluator",)

    def annotation_case(self, entry: RunEntry, item: LegalEvalQItem, record: LegalEvalQRecord) -> Case | None:
        return annotate.case(entry, item, record)

    @classmethod
    def add_commands(cls, sub: Any) -> None:

        add_commands(sub)

    @classmethod
    def validate_path(
        cls, kind: str, path: str, split: str | None, field_map: dict[str, Any] | None, protocol: str | None = None
    ) -> str:
        if field_map:
            raise InputError("LegalEval-Q has no field map; --field-map is for LegalRikai data", field="--field-map")
        if path.endswith(".jsonl"):
            return f"{len(load_annotated(path))} annotated tuples"
        return f"{len(load_queries(path))} queries"

    def settings(self) -> list[Setting]:
        return [{"evaluator": self.options.evaluator.name, "mode": self.options.evaluator_mode}]

    def setting_name(self, setting: Setting) -> str:
        return "legalevalq"

    def departures(self, setting: Setting) -> tuple[str, ...]:
        o = self.options
        if o.protocol != "paper":
            return ()
        out = list(super().departures(setting))
        for message, got, theirs in (
            (ANSWERS_CUT, o.max_tokens, authors.ANSWER_MAX_NEW_TOKENS),
            (CRITIQUES_CUT, o.evaluator_max_tokens, authors.EVALUATOR_MAX_NEW_TOKENS),
        ):
            if got != theirs:
                out.append(message.format(tokens=got, paper=theirs))
        e = o.evaluator
        out.append(EVALUATOR.format(name=e.name, engine=e.backend, path=e.path))
        out.append(SCORER.format(scorer=o.scorer))
        return tuple(out)

    @property
    def model_sampling(self) -> bool:
        """Under paper the candidates decode as their weights' generation_config says: the authors call generate()
        with max_new_tokens only (authors.ANSWER_DECODING_SOURCE)."""
        return self.options.protocol == "paper"

    def check_files(self) -> None:
        o = self.options
        for name, value in (("scorer", o.scorer), ("evaluator.path", o.evaluator.path)):
            if is_url(value):
                raise InputError("URLs are refused; give a local path", field=f"tasks.legalevalq.{name}")
            if why := missing(value):
                raise InputError(f"path {why}: {value}", field=f"tasks.legalevalq.{name}")
        if not (Path(o.scorer) / "scorer_config.json").is_file():
            raise InputError(
                "not a scorer folder (no scorer_config.json)", file=o.scorer, field="tasks.legalevalq.scorer"
            )

        for path in scorer_files(o.scorer):  # the scores are made with these: the setting's provenance names them
            note(path)
        if o.human_scores:
            read_human_scores(o.human_scores)  # fail now, not after the models have run

    def load(self) -> list[LegalEvalQItem]:
        o = self.options
        items = [LegalEvalQItem(**q.model_dump(), id=id_, split="train") for id_, q in query_ids(o.data)]
        if o.validation_data:
            items += [
                LegalEvalQItem(**q.model_dump(), id=f"val:{id_}", split="validation")
                for id_, q in query_ids(o.validation_data)
            ]
        return items[: o.limit] if o.limit else items

    def answer_system(self) -> str:
        """The candidates' system prompt: the authors' under protocol: paper, ours under offline-eval."""
        return authors.SYSTEM if self.options.protocol == "paper" else ANSWER_SYSTEM

    def build(self, items: Sequence[LegalEvalQItem], setting: Setting) -> Phase:
        s = Sampling(temperature=0.0, seed=self.options.seed, max_tokens=self.options.max_tokens)
        system = self.answer_system()
        reqs = [
            Request.chat([{"role": "system", "content": system}, {"role": "user", "content": it.query}], s)
            for it in items
        ]
        return Phase(
            name="legalevalq.answers",
            requests=reqs,
            item_ids=[it.id for it in items],
            overflow=self.options.overflow,
        )

    def score(self, item: LegalEvalQItem, result: Result, setting: Setting) -> LegalEvalQRecord:
        return LegalEvalQRecord(
            id=item.id,
            split=item.split,
            query=item.query,
            output=result.text,
            finish_reason=result.finish_reason,
            gold=item.datasets_ans,
            skipped=result.finish_reason == "overflow",
            prompt_tokens=result.prompt_tokens,
            output_tokens=result.output_tokens,
        )

    def aggregate(self, records: Sequence[LegalEvalQRecord], setting: Setting) -> RunMetrics:
        scored = [r.scores["quality"] for r in records if "quality" in r.scores]
        evaluated = [r for r in records if r.evaluation]
        m = RunMetrics()
        m.update(
            {
                N_ANSWERS.name: sum(1 for r in records if not r.skipped),
                N_SKIPPED.name: sum(1 for r in records if r.skipped),
                TRUNCATED_ANSWERS.name: sum(1 for r in records if r.finish_reason == "length"),
                N_EVALUATED.name: len(evaluated),
                EVALUATOR_PARSE_FAILURES.name: sum(1 for r in evaluated if r.parsed is None),
                N_SCORED.name: len(scored),
            }
        )
        if scored:
            stats = summarize(scored)
            m.update({k.name: round(float(stats[k.name]), 4) for k in (MEAN, STD, MEDIAN, ADJ_SCORE)})
        splits = {r.split for r in records}
        if len(splits) > 1:
            for split in sorted(splits):
                part = [r.scores["quality"] for r in records if r.split == split and "quality" in r.scores]
                if part:
                    got = summarize(part)
                    for k in (MEAN.name, STD.name, ADJ_SCORE.name):
                        m.group("split", split, k, round(float(got[k]), 4))
            by = m.breakdowns.get("split", {})
            t, v = by.get("train", {}), by.get("validation", {})
            adj, mean = ADJ_SCORE.name, MEAN.name
            if adj in t and adj in v and mean in t and mean in v:
                m.put(ADJ_SCORE_DELTA.name, round(_num(v[adj].value) - _num(t[adj].value), 4))
                m.put(MEAN_DELTA.name, round(_num(v[mean].value) - _num(t[mean].value), 4))
        return m

    def evaluation(self) -> LegalEvalQEvaluation:
        return LegalEvalQEvaluation(self.options)

    def judged_numbers(self, setting: Setting, records: Sequence[LegalEvalQRecord]) -> list[JudgedNumber]:
        """The scorer's 0-100 quality, its mean per run (AdjScore, not a mean, has no calibrated form)."""
        return [
            JudgedNumber(
                MEAN.name, "scorer", (0.0, 100.0), lambda r: r.scores.get("quality"), lambda v: v.get("score"),
                headline=True,
            )
        ]  # fmt: skip

    def human_labels(self, runs: Sequence[RunEntry], records: Records[LegalEvalQRecord]) -> HumanLabels | None:

        return human_labels(self.options.human_scores, self.options.human_sample, runs, records)

    def prompt_template(self, setting: Setting) -> str:
        """The answer's system prompt, then the evaluator's system prompt and user message with placeholders."""
        if self.options.evaluator_mode == "authors":
            evaluator = [authors.SYSTEM, authors.user_message("{query}", "{answer}")]
        else:
            evaluator = [ev.SYSTEM, ev.user_message("{query}", "{answer}", "{resource}")]
        return "\n\n".join([self.answer_system(), *evaluator])


class LegalEvalQEvaluation(Evaluation[LegalEvalQItem, LegalEvalQRecord]):
    """The evaluation stage: one evaluator writes a Comment and a Conclusion on every candidate's answer, after all
    candidates; the regression scorer turns them into a score."""

    def __init__(self, options: LegalEvalQOptions) -> None:
        self.options = options

    def models(self) -> list[ModelSpec]:
        return [self.options.evaluator]

    def phase(self, items: Sequence[LegalEvalQItem], records: Records[LegalEvalQRecord]) -> Phase:
        by_id = {it.id: it for it in items}
        mode = self.options.evaluator_mode
        s = Sampling(temperature=0.0, seed=self.options.seed, max_tokens=self.options.evaluator_max_tokens)
        system = authors.SYSTEM if mode == "authors" else ev.SYSTEM
        reqs, ids = [], []
        for run, recs in records.items():
            for r in recs:
                if r.skipped:
                    continue
                it = by_id[r.id]

                def message(answer: str, it: LegalEvalQItem = it) -> str:
                    if mode == "authors":  # the query and answer only: the authors show no resource
                        return authors.user_message(it.query, answer)
                    return ev.user_message(it.query, answer, it.resource)

                reqs.append(
                    Request.chat(
                        [{"role": "system", "content": system}, {"role": "user", "content": message(r.output)}],
                        s,
                        JsonSchema(ev.schema(self.options.comment_max_chars)) if mode == "json" else None,
                        shared_chars(message),
                    )
                )
                ids.append(f"{run}/{output_key(r)}")
        return Phase(name="legalevalq.evaluation", requests=reqs, item_ids=ids, overflow=self.options.overflow)

    def finish(
        self, records: Records[LegalEvalQRecord], phase: Phase, results: dict[str, Sequence[Result]]
    ) -> Records[LegalEvalQRecord]:

        if not results:
            return records
        by_key = dict(zip(phase.item_ids, next(iter(results.values()))))
        mode = self.options.evaluator_mode
        parse = {"json": ev.parse_json, "tags": ev.parse_tags, "authors": authors.parse}[mode]
        todo: list[tuple[LegalEvalQRecord, dict[str, Any]]] = []
        for run, recs in records.items():
            for r in recs:
                res = by_key.get(f"{run}/{output_key(r)}")
                if res is None:
                    continue
                got = parse(res.text) if res.answered else None
                r.evaluation = {
                    "raw": res.text,
                    "finish_reason": res.finish_reason,
                    "comment": got[0] if got else None,
                    "conclusion": got[1] if got else None,
                }
                if mode == "authors":  # the <ans> text goes to the scorer as it is; which grade it names, if any
                    r.evaluation["grade"] = authors.grade_of(got[1]) if got else None
                r.parsed = got[1] if got else None
                if got:
                    todo.append((r, scorer_example(r, *got)))
        if todo:
            scores = Scorer.load(self.options.scorer).predict([x for _, x in todo])
            for (r, _), sc in zip(todo, scores):
                r.scores = {"quality": sc}
        return records

    def constraint(self, setting: Setting) -> JsonSchema | None:
        o = self.options
        return JsonSchema(ev.schema(o.comment_max_chars)) if o.evaluator_mode == "json" else None

    def answers(self, record: LegalEvalQRecord) -> list[str]:
        e = record.evaluation
        return [e["raw"]] if e and record.parsed is not None else []


def scorer_example(record: LegalEvalQRecord, comment: str, conclusion: str) -> dict[str, Any]:
    """What the scorer reads of one evaluated answer (scorer.inputs makes its three texts of it: under the authors'
    protocol their predict(reasoning, ans, input_content))."""
    return {"query": record.query, "answer": record.output, "comment": comment, "conclusion": conclusion}


def _num(x: float | int | None) -> float:
    assert x is not None
    return float(x)
