"""The task contract. A task never imports a backend: it builds requests and scores results."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Generic

from pydantic import BaseModel, ValidationError

from offline_eval.metrics.bootstrap import Clusters
from offline_eval.metrics.declared import with_intervals
from offline_eval.metrics.values import CONSTRAINT_VIOLATIONS, EVERY_TASK, Count
from offline_eval.results.records import ItemRecord, R, TaskReport, sample_of
from offline_eval.runtime.errors import format_validation_error
from offline_eval.runtime.i18n import kept

from .kit import (
    OURS,
    Breakdown,
    Evaluation,
    InputError,
    ItemT,
    Metric,
    Phase,
    Records,
    ReportParts,
    Result,
    RunEntry,
    RunMetrics,
    TaskItem,
)
from .sampled import SAMPLED, sample_metrics

# Where a paper-labelled run departs from the paper (Task.departures), as summary.json stores it; i18n.said reads it
# back.
LIMIT = kept("the first {limit} items (limit)")

if TYPE_CHECKING:
    from offline_eval.metrics.bootstrap import Bootstrapped
    from offline_eval.models.thinking import ReasoningPreset

    from .kit import Case, Form
    from .kit.calibration import HumanLabels, JudgedNumber

Setting = dict[str, Any]
Item = TaskItem  # what generic code knows of any task's items: their id, and their content for provenance


class Task(ABC, Generic[ItemT, R]):
    """A task whose items are ItemT (its own TaskItem model, validated once where load reads them and passed on
    typed) and whose per-item records are R: its own dataclass (`Record`), in its results files' key order."""

    name: ClassVar[str]
    Options: ClassVar[type[BaseModel]]
    Record: ClassVar[type[ItemRecord]]  # with from_json: how the report and later sweeps read its results files
    primary_metric: ClassVar[str] = "mean"  # what leaderboards rank by and plots draw
    metrics: ClassVar[tuple[Metric, ...]] = ()  # the leaderboard's columns, the primary metric first
    breakdowns: ClassVar[tuple[Breakdown, ...]] = ()  # declared metrics per group of items (subject, year...)
    counts: ClassVar[tuple[Count, ...]] = ()  # its other values (counts, shares, checks), read through these
    leaderboard_note: ClassVar[str] = ""
    # The paired metric (None: the primary): its declaration's per-item score is item_score, and its statistic
    # of those scores is what non-inferiority, ablations and compare set side by side; it names the margin.
    paired_metric: ClassVar[str | None] = None
    path_options: ClassVar[tuple[str, ...]] = ("data",)  # options that hold paths (relative to models.yaml)
    model_options: ClassVar[tuple[str, ...]] = ()  # options that hold model specs (evaluators, judges)
    data_kinds: ClassVar[tuple[str, ...]] = ()  # extra names `data validate` accepts (e.g. sub-tasks)
    title: ClassVar[str] = ""  # how the report names the task (default: its name)
    clusters: ClassVar[str] = ""  # what one cluster of its items is (cluster()), for the report's notes

    def __init__(self, options: BaseModel, samples: int | None = None) -> None:
        type(self).paired_declaration()  # refused when made, not with silently missing paired tests
        self.options = options
        self.samples = samples  # answers per item for every sampled model (None: each model's own `samples`)

    @classmethod
    def from_options(cls, options: dict[str, Any], source: str | None = None, prefix: str = "") -> Task:
        """The task from its config block; `samples` is the framework's (any task's), not the task's own."""

        options = dict(options)
        samples = options.pop("samples", None)
        if samples is not None and (type(samples) is not int or samples < 1):
            raise InputError(
                f"samples must be a whole number of answers per item, 1 or more (got {samples!r})",
                file=source,
                field=f"{prefix}.samples" if prefix else "samples",
            )
        try:
            return cls(cls.Options.model_validate(options), samples)
        except ValidationError as e:
            raise format_validation_error(e, source, prefix) from None

    @abstractmethod
    def settings(self) -> list[Setting]:
        """The option combinations one sweep runs, e.g. shots x mode."""

    @abstractmethod
    def setting_name(self, setting: Setting) -> str:
        """File-name-safe name of one setting, e.g. jbeqa.4shot.constrained."""

    @abstractmethod
    def load(self) -> list[ItemT]:
        """Read and schema-check the evaluation items (errors name file, record and field)."""

    def check_files(self) -> None:
        """Refuse, in one line, a missing file the task's runs need besides its items (a judge, an evaluator, a
        scorer, human labels). A sweep checks them before any engine starts; annotate and the report, which run
        none of them, do not, so a results folder opens where those files are absent."""

    @abstractmethod
    def build(self, items: Sequence[ItemT], setting: Setting) -> Phase: ...

    @abstractmethod
    def score(self, item: ItemT, result: Result, setting: Setting) -> R:
        """One per-item record."""

    @abstractmethod
    def aggregate(self, records: Sequence[R], setting: Setting) -> RunMetrics:
        """The run's values (no intervals: those come from the metrics' declarations, in run_metrics)."""

    def run_metrics(self, records: Sequence[R], setting: Setting) -> RunMetrics:
        """A run's metrics on one setting, as summary.json holds them and `verify` recomputes them: the task's
        values and declared metrics (with their intervals), and the answers that broke their constraint; over k
        samples per item, the aggregate of all of them (each item's mean) and the samples' own statistics."""

        metrics = self.declared_metrics(records, setting, *self.resamples())
        metrics.put(CONSTRAINT_VIOLATIONS.name, sum(1 for r in records if r.finish_reason == "violation"))
        metrics.update(sample_metrics(self, records, setting))
        if undeclared := set(metrics.values) - self.declared_names():
            raise TypeError(
                f"task {self.name} reports values it does not declare (metrics, counts): {sorted(undeclared)}"
            )
        return metrics

    @classmethod
    def declared_names(cls) -> set[str]:
        """Every value a run of the task may hold: its metrics, its counts, and those of every task."""

        return {m.name for m in cls.metrics} | {c.name for c in (*cls.counts, *EVERY_TASK, *SAMPLED)}

    def declared_metrics(
        self, records: Sequence[R], setting: Setting, n_resamples: int = 0, seed: int = 0
    ) -> RunMetrics:
        """The task's aggregate with its declared metrics filled in over the items that have an item_score: each
        one's value (where the aggregate does not give it), its clustered interval (with n_resamples), and the
        declared breakdowns."""
        metrics = self.aggregate(records, setting)
        scored = [r for r in records if self.item_score(r) is not None]
        with_intervals(
            metrics,
            scored,
            Clusters.of([self.cluster_of(r) for r in scored]),
            [(m.name, m.ci) for m in self.metrics if m.ci is not None],
            self.breakdowns,
            n_resamples=n_resamples,
            seed=seed,
            design_effect_of=self.primary_metric,
        )
        return metrics

    @property
    def protocol(self) -> str:
        """The protocol its runs follow (tasks/kit/protocol.py): the task's `protocol` option; a task without one runs
        its own, offline-eval's."""
        return str(getattr(self.options, "protocol", OURS))

    def departures(self, setting: Setting) -> tuple[str, ...]:
        """Where a setting of a `protocol: paper` task is not the paper's protocol (a mode of ours, fewer items, a
        shorter answer...), one phrase each: its runs are labelled paper with these beside them. Empty under
        offline-eval. A task that overrides this adds its own to these."""
        limit = getattr(self.options, "limit", None)
        return (LIMIT.format(limit=limit),) if self.protocol == "paper" and limit else ()

    @property
    def model_sampling(self) -> bool:
        """The task's protocol decodes each candidate as its weights' files say (its generation_config, as the
        authors' code calls generate() without sampling arguments) where models.yaml gives the model no sampling
        of its own; False: greedy, as every task asks by default."""
        return False

    @property
    def reasoning_preset(self) -> ReasoningPreset | None:
        """How the task's protocol decodes a model that thinks, where models.yaml leaves it (a paper's reasoning
        protocol); None: as models.yaml says."""
        return None

    def resamples(self) -> tuple[int, int]:
        """(resamples, seed) of the clustered bootstrap: the task's `bootstrap` and `seed` options (0: none)."""
        return int(getattr(self.options, "bootstrap", 0)), int(getattr(self.options, "seed", 0))

    @abstractmethod
    def prompt_template(self, setting: Setting) -> str:
        """The text the setting's prompts are made from (system prompts, templates with placeholders for the
        item's fields, the exemplars chosen): its sha256 is part of the sweep's provenance."""

    def setting_items(self, items: Sequence[ItemT], setting: Setting) -> Sequence[ItemT]:
        """The items one setting runs on (a task with sub-tasks gives each setting its own)."""
        return items

    def evaluation(self) -> Evaluation[ItemT, R] | None:
        """The task's second stage, a companion object (tasks/kit/evaluation.py): LLM judges or an evaluation model
        that score the candidates' outputs (None: the task, as configured, has none)."""
        return None

    # Human annotation (`offline-eval annotate`): a task that declares its export form offers its outputs.
    annotation_form: ClassVar[Form | None] = None

    def annotation_case(self, entry: RunEntry, item: ItemT, record: R) -> Case | None:
        """One candidate output for an annotator (None: nothing to annotate, e.g. an input that was skipped)."""
        return None

    def sweep_report(self, runs: Sequence[RunEntry], records: Records[R]) -> TaskReport | None:
        """Tables across runs (e.g. judge-human agreement), kept in summary.json under task_reports."""
        return None

    # Calibration by human labels (kit/calibration.py, docs/calibration.md): a task whose numbers come from judges.
    def judged_numbers(self, setting: Setting, records: Sequence[R]) -> list[JudgedNumber]:
        """The numbers of a run on this setting that judges give, each correctable with human labels (none: the
        task's scores are not judged)."""
        return []

    def human_labels(self, runs: Sequence[RunEntry], records: Records[R]) -> HumanLabels | None:
        """The human labels the task's options name, matched to these runs' outputs (None: it has none)."""
        return None

    # The record field naming the stratum the annotation page's draw sampled an output in, besides its run (its
    # Case.stratum: LegalRikai's sub-task, LegalEval-Q's split); None: one stratum.
    stratum_field: ClassVar[str | None] = None

    @classmethod
    def design_stratum(cls, record: R) -> str:
        return str(getattr(record, cls.stratum_field)) if cls.stratum_field else ""

    def item_score(self, record: R) -> float | None:
        """The per-item score, as the paired metric's declaration gives it (`Bootstrapped.mean` or `.of_items`):
        the items the declared metrics' intervals resample, and what the paired tests of ablations and verdicts
        compare (None: the item does not count)."""
        item = self.paired_declaration().item
        assert item is not None  # paired_declaration refuses a metric without one
        return item(record)

    @classmethod
    def cluster(cls, record: R) -> str | None:
        """The cluster of the item a record scores: items that share a source (the statements of one exam
        question, the outputs for one question) are correlated, so every bootstrap resamples clusters, not items.
        None: the item is its own cluster, and is counted as having none."""
        return None

    @classmethod
    def cluster_of(cls, record: R) -> str | None:
        """cluster(), where an item answered k times is at least its own cluster: its samples are resampled
        together, never as k independent items."""
        c = cls.cluster(record)
        return c if c is not None or sample_of(record) is None else f"item {record.id}"

    @classmethod
    def paired_declaration(cls) -> Bootstrapped:
        """The paired metric's declaration: its per-item score and the statistic of those scores."""
        metric = cls.noninferiority_metric()
        if metric.ci is None or metric.ci.item is None:
            raise TypeError(
                f"task {cls.name}: its paired metric {metric.name!r} declares no per-item score "
                "(ci=Bootstrapped.mean(...) or Bootstrapped.of_items(...))"
            )
        return metric.ci

    @classmethod
    def paired_statistic(cls) -> Bootstrapped | None:
        """The paired metric over per-item scores (None: their mean, the paired tests' own case)."""
        ci = cls.paired_declaration()
        return None if ci.is_mean else ci

    @classmethod
    def noninferiority_metric(cls) -> Metric:
        name = cls.paired_metric or cls.primary_metric
        return next((m for m in cls.metrics if m.name == name), Metric(name, name))

    # ---- the task's own part of the report: its companion object (tasks/kit/parts.py), all optional
    report_parts: ClassVar[type[ReportParts]] = ReportParts

    def browser_diffs(self, item: ItemT, record: R) -> dict[str, list[list[str]]]:
        """Diffs the item browser draws beside one run's answer, needing the item (e.g. a revised contract
        against the input one): {label: [[op, text], ...]}, op "=" kept, "+" inserted, "-" deleted, "…" elided
        (offline_eval.ja.show.diff_segments makes them). Called by the sweep, which holds the items."""
        return {}

    @classmethod
    def add_commands(cls, sub: Any) -> None:
        """The task's own `offline-eval` subcommands, added to the CLI's subparsers (none by default)."""

    @classmethod
    def validate_path(
        cls, kind: str, path: str, split: str | None, field_map: dict[str, Any] | None, protocol: str | None = None
    ) -> str:
        """`offline-eval data validate KIND PATH`: the sweep's own loading and checks, or an error. `split` and
        `protocol` where given and the task has those options (else the task's defaults)."""
        fields = cls.Options.model_fields
        opts: dict[str, Any] = {"data": path}
        opts |= {k: v for k, v in (("split", split), ("protocol", protocol)) if v is not None and k in fields}
        if field_map:
            raise InputError(f"task {kind} has no field map", field="--field-map")
        task = cls.from_options(opts, source="command line", prefix=f"tasks.{cls.name}")
        return task.validate_data(path)

    # Engine consistency: runs of the same weights on different engines, compared item by item.
    def item_answer(self, record: R) -> Any:
        """The answer as two engines' outputs are compared (None: the task has no comparable answer)."""
        return None

    def item_probability(self, record: R) -> float | None:
        """P(positive answer), where the setting scored label probabilities (logprob mode)."""
        return None

    def validate_data(self, path: str) -> str:
        """`offline-eval data validate`: check every split the path holds; returns a one-line summary."""
        raise NotImplementedError
