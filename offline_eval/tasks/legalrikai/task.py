"""LegalRikai as a task: one setting per sub-task (AmendExp, StatRev, ReqRev, RiskRev). Candidates write
Markdown; the toolkit's deterministic checks run at once; after every candidate, each LLM judge scores every
output against the paper's rubric in constrained JSON, and the scores are normalised and averaged.

Two protocols (tasks/kit/protocol.py; docs/tasks/legalrikai.md, "Protocol"): `paper` sizes the revision tasks' answer
cap to the input contract (answer_cap) and sends no answer cut off by its cap to the judges; `offline-eval` keeps
one cap for every sub-task and judges a cut answer as it stands, as every sweep before protocols did."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from offline_eval.ja.diff import diff_segments, diff_texts
from offline_eval.models.spec import ModelSpec, one_load
from offline_eval.results.records import TaskReport
from offline_eval.runtime.errors import is_url, missing
from offline_eval.runtime.i18n import N_
from offline_eval.tasks.base import Setting, Task
from offline_eval.tasks.kit import (
    MAX_BOOTSTRAP,
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
    Unset,
    judges,
    output_key,
    protocol_field,
    shared_chars,
)
from offline_eval.tasks.kit.calibration import HUMAN_SAMPLE_HELP, HumanLabels, HumanSample, JudgedNumber

from . import prompts, rubric
from .checks import read_output
from .departures import paper_departures
from .focus import focus_statutes
from .gold import gold, judge_gold
from .human import annotate
from .human.agreement import human_labels, read_human_scores, sweep_report
from .human.calibration import judged_numbers
from .metrics import COUNTS, SCORE, aggregate
from .outputs import strip_fences
from .record import LegalRikaiRecord
from .report import LegalRikaiReportParts
from .rubric import SUBTASKS
from .schema import SCHEMAS, AmendExpItem, LegalRikaiItem, RevisionItem, StatRevItem, load_items

if TYPE_CHECKING:
    from offline_eval.tasks.kit import Case

_FORMATS = (".jsonl", ".json", ".parquet")


class LegalRikaiOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    data: str | dict[str, str] = Field(
        description="a folder with amendexp/statrev/reqrev/riskrev .jsonl|.json|"
        ".parquet (or datasets folders), or one path per sub-task"
    )
    subtasks: list[Literal["amendexp", "statrev", "reqrev", "riskrev"]] | None = None
    split: str = "test"
    field_map: dict[str, str | dict[str, str]] = Field(
        default_factory=dict, description="our field name -> the local copy's; or per sub-task: {statrev: {...}}"
    )
    judges: list[Annotated[ModelSpec, AfterValidator(one_load)]] = Field(default_factory=list)
    overflow: Literal["skip", "fail", "focus"] = "focus"
    focus_neighbours: int = Field(1, ge=0, description="policy 'focus': unchanged articles kept either side")
    protocol: Protocol = protocol_field(
        "paper: the revision tasks' answer cap fits the whole contract and a cut answer is not judged; "
        "offline-eval: max_tokens for every sub-task and cut answers judged, as before protocols",
    )
    max_tokens: int = Field(2048, ge=1, description="the answer cap (protocol paper: AmendExp's, and the least)")
    answer_tokens_per_char: float = Field(
        1.5,
        gt=0,
        description="protocol paper: StatRev/ReqRev/RiskRev's answer cap in tokens per character of the input "
        "contract (and ReqRev/RiskRev's instructions)",
    )
    judge_max_tokens: int = Field(1024, ge=16)
    rationale_max_chars: int = Field(200, ge=1)
    human_scores: str | list[str] | None = Field(
        None,
        description="CSV or JSONL: item_id, model, criterion, score, annotator (optional: task); or a list of "
        "them, one per annotator (offline-eval annotate's exports)",
    )
    human_sample: HumanSample | None = Field(None, description=HUMAN_SAMPLE_HELP)
    limit: int | None = Field(None, ge=1, description="items per sub-task")
    bootstrap: int = Field(1000, ge=0, le=MAX_BOOTSTRAP, description="resamples for the 95% CIs (0 = off)")
    seed: int = 0


class LegalRikaiTask(Task[LegalRikaiItem, LegalRikaiRecord]):
    name = "legalrikai"
    title = "LegalRikai"
    clusters = N_("the source item")
    Options = LegalRikaiOptions
    Record = LegalRikaiRecord
    options: LegalRikaiOptions
    report_parts = LegalRikaiReportParts
    primary_metric = SCORE.name
    metrics = (SCORE,)
    counts = COUNTS
    path_options = ("data", "human_scores")
    model_options = ("judges",)
    data_kinds = SUBTASKS
    annotation_form = annotate.FORM
    stratum_field = "subtask"

    def browser_diffs(self, item: LegalRikaiItem, record: LegalRikaiRecord) -> dict[str, list[list[str]]]:
        """For the revision sub-tasks, the revised contract (StatRev: merged back) against the input contract."""
        if record.checks is None or not isinstance(item, StatRevItem | RevisionItem):
            return {}

        revised = record.revised if not isinstance(record.revised, Unset) else strip_fences(record.output or "")
        return {
            N_("diff against the input contract"): diff_segments(
                diff_texts(item.contract, revised, with_morphemes=False)
            )
        }

    def annotation_case(self, entry: RunEntry, item: LegalRikaiItem, record: LegalRikaiRecord) -> Case | None:
        return annotate.case(entry, item, record, self.browser_diffs(item, record))

    @classmethod
    def validate_path(
        cls, kind: str, path: str, split: str | None, field_map: dict[str, Any] | None, protocol: str | None = None
    ) -> str:
        """`legalrikai FOLDER` checks every sub-task found; `statrev FILE` (or another sub-task) one file."""
        if kind in SUBTASKS:
            if field_map and any(isinstance(v, dict) for v in field_map.values()):
                raise InputError(f'give {kind}\'s map flat ({{"our_field": "their_field"}})', field="--field-map")
            return f"{len(load_items(kind, path, split or 'test', field_map))} {kind} items"
        opts: dict[str, Any] = {
            "data": path,
            "split": split or "test",
            **({"field_map": field_map} if field_map else {}),
        }
        opts |= {"protocol": protocol} if protocol else {}
        task = cls.from_options(opts, source="command line", prefix="tasks.legalrikai")
        return task.validate_data(path)

    def __init__(self, options: LegalRikaiOptions, samples: int | None = None) -> None:
        super().__init__(options, samples)
        self._focus: dict[tuple[str, str], tuple[str, str] | None] = {}

    # ---- data
    def paths(self) -> dict[str, str]:
        o, field = self.options, "tasks.legalrikai.data"
        if isinstance(o.data, dict):
            bad = set(o.data) - set(SUBTASKS)
            if bad:
                raise InputError(
                    f"unknown sub-task(s) {', '.join(sorted(bad))}; expected {', '.join(SUBTASKS)}", field=field
                )
            found = dict(o.data)
        else:
            if is_url(o.data):
                raise InputError("URLs are refused; give a local path", field=field)
            base = Path(o.data)
            if base.is_file():
                raise InputError(
                    "give a folder holding the sub-task files, or one path per sub-task "
                    "({amendexp: ..., statrev: ...})",
                    file=o.data,
                    field=field,
                )
            found = {}
            for sub in SUBTASKS:
                for cand in [base / f"{sub}{suf}" for suf in _FORMATS] + [base / sub]:
                    if cand.exists():
                        found[sub] = str(cand)
                        break
        want: list[str] = list(o.subtasks) if o.subtasks else [s for s in SUBTASKS if s in found]
        missing = [s for s in want if s not in found]
        if missing or not want:
            raise InputError(
                f"no data for {', '.join(missing) or 'any sub-task'} (expected <sub-task>.jsonl, "
                f".json, .parquet or a folder)",
                file=str(o.data) if isinstance(o.data, str) else None,
                field=field,
            )
        return {s: found[s] for s in want}

    def field_map(self, subtask: str) -> dict[str, str]:
        """The sub-task's own map if given, else the flat entries; keys that no schema has are errors."""

        fm = self.options.field_map
        known = {f for schema in SCHEMAS.values() for f in schema.model_fields if f != "subtask"}
        bad = sorted(k for k, v in fm.items() if (k not in SUBTASKS if isinstance(v, dict) else k not in known))
        if bad:
            raise InputError(
                f"unknown key(s) {', '.join(bad)}: give our field names ({', '.join(sorted(known))}) "
                f"or a sub-task ({', '.join(SUBTASKS)})",
                field="tasks.legalrikai.field_map",
            )
        if subtask in fm and isinstance(fm[subtask], dict):
            return dict(fm[subtask])  # type: ignore[arg-type]
        return {k: v for k, v in fm.items() if isinstance(v, str)}

    def check_files(self) -> None:
        o = self.options
        for i, j in enumerate(o.judges):
            if is_url(j.path):
                raise InputError("URLs are refused; give a local path", field=f"tasks.legalrikai.judges.{i}.path")
            if why := missing(j.path):
                raise InputError(f"path {why}: {j.path}", field=f"tasks.legalrikai.judges.{i}.path")
        if o.human_scores:
            read_human_scores(o.human_scores)  # fail now, not after the models have run

    def load(self) -> list[LegalRikaiItem]:

        items: list[LegalRikaiItem] = []
        for sub, path in self.paths().items():
            items += load_items(sub, path, self.options.split, self.field_map(sub))[: self.options.limit]
        return items

    def validate_data(self, path: str) -> str:
        return ", ".join(f"{n} {s}" for s, n in self._counts(path).items())

    def _counts(self, path: str) -> dict[str, int]:
        self.options = self.options.model_copy(update={"data": path})
        items = self.load()
        return {s: sum(1 for it in items if it.subtask == s) for s in self.paths()}

    # ---- generation
    def settings(self) -> list[Setting]:
        return [{"subtask": s, "overflow": self.options.overflow} for s in self.paths()]

    def setting_name(self, setting: Setting) -> str:
        return f"legalrikai.{setting['subtask']}"

    def setting_items(self, items: Sequence[LegalRikaiItem], setting: Setting) -> Sequence[LegalRikaiItem]:
        return [it for it in items if it.subtask == setting["subtask"]]

    def focused(self, item: LegalRikaiItem) -> dict[str, str] | None:
        """The statutes cut to their changed articles and neighbours (None: no statute, or nothing to cut)."""
        if not isinstance(item, AmendExpItem | StatRevItem):
            return None
        key = (item.subtask, item.id)
        if key not in self._focus:
            self._focus[key] = focus_statutes(item.statute_pre, item.statute_post, self.options.focus_neighbours)
        f = self._focus[key]
        return {"statute_pre": f[0], "statute_post": f[1]} if f else None

    def chat(self, user: str, sampling: Sampling, constraint: Any = None, shared: int | None = None) -> Request:
        return Request.chat(
            [{"role": "system", "content": prompts.system()}, {"role": "user", "content": user}],
            sampling,
            constraint,
            shared,
        )

    def answer_cap(self, item: LegalRikaiItem) -> int:
        """The candidate's max_tokens. offline-eval: `max_tokens` for every sub-task. paper: AmendExp keeps
        `max_tokens` (two short sections); StatRev, ReqRev and RiskRev answer with contract text (StatRev its revised
        articles, at most the whole contract; ReqRev and RiskRev the whole contract, 6,530 characters on average in
        the paper's Table 4), so their cap is ceil(answer_tokens_per_char x the characters of the input contract,
        plus ReqRev/RiskRev's instructions, which may hold wording to add), and never under `max_tokens`. The task
        knows no tokenizer, hence characters; where the prompt plus this cap exceeds the context, the runner's fit
        rule applies the overflow policy (ReqRev/RiskRev have no shorter prompt: skipped and counted)."""
        o = self.options
        if o.protocol != "paper" or isinstance(item, AmendExpItem):
            return o.max_tokens
        assert isinstance(item, StatRevItem | RevisionItem)
        chars = len(item.contract) + (sum(len(x) for x in item.instructions) if isinstance(item, RevisionItem) else 0)
        return max(o.max_tokens, math.ceil(o.answer_tokens_per_char * chars))

    def departures(self, setting: Setting) -> tuple[str, ...]:
        return (*super().departures(setting), *paper_departures(self.options)) if self.protocol == "paper" else ()

    @property
    def judges_cut_answers(self) -> bool:
        """Whether an answer cut off by its cap (finish_reason 'length') goes to the judges: not under the paper's
        protocol (a cut contract judged as if whole is a silent wrong score); under offline-eval's, as before."""
        return self.options.protocol != "paper"

    def build(self, items: Sequence[LegalRikaiItem], setting: Setting) -> Phase:
        reqs, fallbacks = [], []
        for it in items:
            s = Sampling(temperature=0.0, seed=self.options.seed, max_tokens=self.answer_cap(it))
            reqs.append(self.chat(prompts.task_prompt(it), s))
            f = self.focused(it) if self.options.overflow == "focus" else None
            fallbacks.append(self.chat(prompts.task_prompt(it, f), s) if f else None)
        return Phase(
            name=f"legalrikai.{setting['subtask']}",
            requests=reqs,
            item_ids=[f"{it.subtask}/{it.id}" for it in items],
            overflow=self.options.overflow,
            fallbacks=fallbacks if any(fallbacks) else None,
        )

    def score(self, item: LegalRikaiItem, result: Result, setting: Setting) -> LegalRikaiRecord:

        skipped = result.finish_reason == "overflow"
        rec = LegalRikaiRecord(
            id=item.id,
            subtask=item.subtask,
            input="skipped" if skipped else ("focused" if result.focused else "full"),
            output=result.text,
            finish_reason=result.finish_reason,
            prompt_tokens=result.prompt_tokens,
            output_tokens=result.output_tokens,
            gold=gold(item),
        )
        # A cut answer the judges will not see (protocol paper) is not read either: no merge-back or checks of a
        # contract's first part; `truncated` counts it, apart from the format failures.
        if not skipped and (result.finish_reason != "length" or self.judges_cut_answers):
            got = read_output(item, result.text)
            rec.parsed, rec.checks, rec.revised = got.parsed, got.checks, got.revised
        return rec

    # ---- metrics
    def aggregate(self, records: Sequence[LegalRikaiRecord], setting: Setting) -> RunMetrics:
        return aggregate(setting["subtask"], records, cut_judged=self.judges_cut_answers)

    @classmethod
    def cluster(cls, record: LegalRikaiRecord) -> str | None:
        return record.source_item

    def prompt_template(self, setting: Setting) -> str:
        """The package's templates this setting renders (system, its sub-task's, the judge's) and the rubric."""
        from importlib import resources

        return "\n\n".join(
            [*(prompts.template_source(n) for n in ("system", setting["subtask"], "judge"))]
            + [resources.files(rubric.__package__).joinpath("rubrics.yaml").read_text(encoding="utf-8")]
        )

    def evaluation(self) -> LegalRikaiJudges | None:
        return LegalRikaiJudges(self) if self.options.judges else None

    def sweep_report(self, runs: Sequence[RunEntry], records: Records[LegalRikaiRecord]) -> TaskReport | None:

        o = self.options
        return sweep_report(runs, records, o.human_scores, n_resamples=o.bootstrap, seed=o.seed)

    def judged_numbers(self, setting: Setting, records: Sequence[LegalRikaiRecord]) -> list[JudgedNumber]:
        return judged_numbers(setting["subtask"], sorted({j for r in records for j in r.judges}))

    def human_labels(self, runs: Sequence[RunEntry], records: Records[LegalRikaiRecord]) -> HumanLabels | None:

        return human_labels(self.options.human_scores, self.options.human_sample, runs, records)


class LegalRikaiJudges(Evaluation[LegalRikaiItem, LegalRikaiRecord]):
    """The judges: each scores every candidate's output against its sub-task's rubric, in constrained JSON, after all
    candidates; a record's scores are each criterion's mean over the judges that answered."""

    def __init__(self, task: LegalRikaiTask) -> None:
        self.task = task

    def models(self) -> list[ModelSpec]:
        return list(self.task.options.judges)

    def phase(self, items: Sequence[LegalRikaiItem], records: Records[LegalRikaiRecord]) -> Phase:
        by_id = {(it.subtask, it.id): it for it in items}
        o = self.task.options
        reqs, ids, fallbacks = [], [], []
        for key, recs in records.items():
            for r in recs:
                it = by_id.get((r.subtask, r.id))
                if it is None or r.skipped or (r.finish_reason == "length" and not self.task.judges_cut_answers):
                    continue
                schema = JsonSchema(rubric.judge_schema(it.subtask, o.rationale_max_chars))
                s = Sampling(temperature=0.0, seed=o.seed, max_tokens=o.judge_max_tokens)
                f = self.task.focused(it) if o.overflow == "focus" else None
                seen = prompts.task_prompt(it, f if r.input == "focused" else None)
                reqs.append(self.judge(it, seen, r.output, s, schema))
                fallbacks.append(
                    self.judge(it, prompts.task_prompt(it, f), r.output, s, schema) if f and r.input == "full" else None
                )
                ids.append(f"{key}/{r.subtask}/{output_key(r)}")
        return Phase(
            name="legalrikai.judges",
            requests=reqs,
            item_ids=ids,
            overflow=o.overflow,
            fallbacks=fallbacks if any(fallbacks) else None,
        )

    def judge(
        self, item: LegalRikaiItem, original_prompt: str, response: str, s: Sampling, schema: JsonSchema
    ) -> Request:
        def text(resp: str) -> str:
            return prompts.judge_prompt(
                item, original_prompt, resp, judge_gold(item), self.task.options.rationale_max_chars
            )

        return self.task.chat(text(response), s, schema, shared_chars(text))

    def finish(
        self, records: Records[LegalRikaiRecord], phase: Phase, results: dict[str, Sequence[Result]]
    ) -> Records[LegalRikaiRecord]:
        by_judge = {j: dict(zip(phase.item_ids, res)) for j, res in results.items()}
        for key, recs in records.items():
            for r in recs:
                r.judges = {}
                for j, got in by_judge.items():
                    x = got.get(f"{key}/{r.subtask}/{output_key(r)}")
                    if x is not None:
                        r.judges[j] = judge_entry(r.subtask, x)
                r.scores = average_scores(r.subtask, r.judges)
        return records

    def constraint(self, setting: Setting) -> JsonSchema | None:
        return JsonSchema(rubric.judge_schema(setting["subtask"], self.task.options.rationale_max_chars))

    def answers(self, record: LegalRikaiRecord) -> list[str]:
        return [v["raw"] for v in record.judges.values() if v.get("scores") is not None and "raw" in v]


def judge_entry(subtask: str, x: Result) -> dict[str, Any]:
    return judges.judge_entry(rubric.criteria(subtask), x)


def average_scores(subtask: str, verdicts: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Per criterion: each judge's score mapped to [0, 1] by (s - min)/(max - min), then the mean over the
    judges that answered ("Avg")."""
    return judges.mean_over_judges(rubric.criteria(subtask), verdicts)
