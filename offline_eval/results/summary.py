"""summary.json as one typed model: the sweep writes it, and `offline-eval report`, `offline-eval verify` and the
Python API read it, all through `Summary`. Its JSON Schema ships with the package
(offline_eval/schemas/summary.schema.json; `offline-eval schema summary` prints it), so others can read results
without this code. A summary of another schema version is refused in one line, never half-read."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from offline_eval.metrics.noninferiority import NonInferiority
from offline_eval.metrics.stats import PairedResult
from offline_eval.runtime.errors import InputError, MissingExtraError, format_validation_error
from offline_eval.runtime.fileio import write_json_atomic
from offline_eval.runtime.i18n import kept
from offline_eval.runtime.lock import holder

from .calibration import CalibrationRow
from .migrate import forward
from .records import ItemRecord, PlainRecord, ResultsFolder, RunEntry

# 5: judged numbers calibrated by human labels; 4: metrics as values; 3: typed, with provenance; 2: clustered CIs and
# score intervals; 1: the first
SCHEMA_VERSION = 5
OLDEST_READ = 2  # older versions, and newer ones, are refused in one line


RecordClass = Callable[[str], type[ItemRecord]]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Failure(_Model):
    """A run (or an evaluator) that did not finish: its reason in one line."""

    run: str
    model: str
    variant: str
    backend: str
    max_model_len: int | None
    reason: str


class LeaderboardRow(BaseModel):
    """One run in a task setting's ranking (best first; a run with no score last, with a note). A task may add
    fields of its own (LegalEval-Q: the tier)."""

    model_config = ConfigDict(extra="allow")

    run: str
    metric: str
    value: float | None
    note: str | None = None


class Verdict(NonInferiority):
    """One run against its model's reference on one task setting (`against`: another run, e.g. an adapter's
    base)."""

    run: str
    variant: str
    max_model_len: int
    task: str
    setting: str
    metric: str
    against: str | None = None
    scale: str | None = None  # a judged task's: "calibrated" (PPI++ on human labels) or "judge"
    scale_note: str | None = None  # why the judge's scale, where human labels exist


class ModelVerdicts(_Model):
    model: str
    backend: str
    reference: str
    comparisons: list[Verdict]
    reference_missing: list[str]
    # each adapter over an Int8/Int4 file against the same adapter on the model's own weights
    adapter_transfer: list[Verdict] = Field(default_factory=list)


class Ablation(_Model):
    """One family (a model's variants at one context length, or its context lengths at one variant), every pair
    of members compared on the items all of them scored."""

    kind: str
    family: str
    task: str
    setting: str
    members: list[str]
    n_items: int
    n_clusters: int
    comparisons: list[PairedResult]


class FileDigest(_Model):
    path: str  # relative to a model folder for weights; as read for data files
    size: int
    sha256: str


class Gpu(_Model):
    name: str
    driver: str | None
    memory_mb: int | None


# Why a provenance value is unknown (SweepProvenance.unknown, LoadProvenance.unknown), as the sweep writes it in
# English; the report shows it in the reader's language (offline_eval.runtime.i18n.said).
UNKNOWN_CPU = kept("the OS does not say (no 'model name' in /proc/cpuinfo)")
UNKNOWN_SERVED_FILES = kept("a served model: its weights are on the server")
UNKNOWN_SERVED_TEMPLATE = kept("a served model is prompted with the server's own chat template")
UNKNOWN_NO_CHECKOUT = kept("offline-eval is not running from a git checkout")
UNKNOWN_NO_GIT = kept("running from a checkout, but git is not installed")
UNKNOWN_GIT_FAILED = kept("git failed: {error}")
UNKNOWN_NO_SMI = kept("nvidia-smi is not installed: no NVIDIA driver here (other GPUs are not looked for)")
UNKNOWN_SMI_FAILED = kept("nvidia-smi failed: {error}")


class SweepProvenance(_Model):
    """What ran the sweep. A value that cannot be known is null, and `unknown` says why: it is never guessed."""

    offline_eval_version: str
    git_revision: str | None
    git_dirty: bool | None
    command: list[str]
    config: str | None  # the config file, or None for a config given as a dict or built from the command line
    config_sha256: str  # of the file's bytes, or of the config's canonical JSON
    python: str
    os: str
    cpu_model: str | None
    cpu_count: int | None
    gpus: list[Gpu] | None
    libraries: dict[str, str]  # the engine libraries installed, and their versions
    started: str
    ended: str | None = None
    unknown: dict[str, str] = Field(default_factory=dict)


class LoadProvenance(_Model):
    """One engine load, judges and evaluators included."""

    run: str
    role: str  # candidate | evaluator
    engine: str
    engine_version: str
    path: str
    load_options: dict[str, Any]
    store_fingerprint: str  # the model part of every store key of this load: weights, engine, load options
    weights_digest: str | None  # sha256 over the files below ("path size sha256" lines, sorted)
    files: list[FileDigest] | None
    chat_template_sha256: str | None  # None where the prompt format is plain
    prompt_format: str  # chat | plain | server (a served model applies its own template)
    unknown: dict[str, str] = Field(default_factory=dict)
    decoding: dict[str, Any] | None = None  # the model's sampling and thinking settings, where it has any
    # What the engine's start did (vLLM: compiled or reused its compile cache); None: no engine started (every
    # output served from the store) or it says nothing. An event of the sweep, as timings are: verify keeps it.
    engine_start: dict[str, Any] | None = None
    # What the folder's config.json declares its weights quantized to (None: not a quantized folder)
    quantization: dict[str, Any] | None = None
    # The LoRA adapter over the weights (None: none): format, rank, alpha, target modules, declared base, digest
    adapter: dict[str, Any] | None = None
    # The library that masked constrained tokens (auto resolved); None: a served model's server chose
    constraint_backend: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _before_backends(cls, data: Any) -> Any:
        """A load recorded before backends could be chosen ran its engine's default of that time."""
        if isinstance(data, dict) and "constraint_backend" not in data:
            engine = data.get("engine")
            data = {**data, "constraint_backend": {"llamacpp": "gbnf", "openai": None}.get(str(engine), "xgrammar")}
        return data


class SettingProvenance(_Model):
    """One task setting: what its items and prompts were made from."""

    task: str
    setting: str
    task_options: dict[str, Any]  # the task's options as the sweep validated them (paths resolved)
    data_files: list[FileDigest]
    n_items: int
    prompt_template_sha256: str
    constraint: dict[str, Any] | None  # the candidates' answers' constraint
    evaluation_constraint: dict[str, Any] | None = None  # the judges' or evaluator's, where the task has them
    # item id -> the first 16 hex digits of its content's sha256 (None in folders made before it was recorded)
    item_digests: dict[str, str] | None = None

    @property
    def constraint_kind(self) -> str:
        """The kind of the candidates' constraint, as its description names it ("none": unconstrained)."""
        return str((self.constraint or {}).get("type", "none"))


class Provenance(_Model):
    sweep: SweepProvenance
    loads: list[LoadProvenance]
    settings: list[SettingProvenance]


class ConsistencyRow(BaseModel):
    """Two runs of the same weights on one task setting, on the items both answered."""

    model_config = ConfigDict(extra="forbid")

    setting: str
    task: str
    run_a: str
    run_b: str
    n_items: int
    identical: float | None  # the share of identical answers
    kappa: float | None
    metric: str
    metric_a: float | None
    metric_b: float | None
    delta: float | None
    paired_test: str  # mcnemar (0/1 scores) | wilcoxon | none
    p: float | None
    mean_abs_diff_p_true: float | None = None  # logprob settings only


class Summary(_Model):
    schema_version: int
    provenance: Provenance | None = None  # None only in a dry run
    runs: list[RunEntry] = Field(default_factory=list)
    failures: list[Failure] = Field(default_factory=list)
    leaderboards: dict[str, list[LeaderboardRow]] = Field(default_factory=dict)
    noninferiority: list[ModelVerdicts] = Field(default_factory=list)
    ablations: list[Ablation] = Field(default_factory=list)
    consistency: list[ConsistencyRow] = Field(default_factory=list)
    task_reports: dict[str, dict[str, Any]] = Field(default_factory=dict)
    calibration: list[CalibrationRow] = Field(default_factory=list)  # absent in folders made before it
    calibration_notes: dict[str, list[str]] = Field(default_factory=dict)  # task -> label rows that matched no output
    timings: dict[str, Any] | None = None  # wall-clock, like each run's throughput: differs between equal sweeps
    _folder: Path | None = PrivateAttr(default=None)  # the output folder it was written to or read from
    _generation: tuple[int, int, int] | None = PrivateAttr(default=None)  # summary.json's (inode, size, mtime)
    _read_from: int | None = PrivateAttr(default=None)  # the schema version of the file it was migrated from
    _record_class: RecordClass | None = PrivateAttr(default=None)  # a task's record type, by task name

    @property
    def migrated_from(self) -> int | None:
        """The older schema version the file holds, where it was read forward (None: it is the current one)."""
        return self._read_from

    def migration_note(self) -> str | None:
        """The one line a command prints about a summary read forward (None: nothing was migrated)."""
        if self._read_from is None:
            return None
        return (
            f"{self._folder / 'summary.json' if self._folder else 'summary.json'}: schema version {self._read_from}, "
            f"read forward to version {SCHEMA_VERSION} (the file is left as it is; a re-sweep writes version "
            f"{SCHEMA_VERSION})"
        )

    @property
    def folder(self) -> Path | None:
        return self._folder

    def records(self, run: str, setting: str) -> list[ItemRecord]:
        """One run's per-item records on one task setting, typed by its task's record class (a task this
        installation lacks gives the generic fields only)."""
        entry = next((r for r in self.runs if r.run == run and r.setting == setting), None)
        if entry is None:
            raise InputError(f"no run {run!r} on setting {setting!r} in this summary", field="run")
        if self._folder is None:
            raise InputError("this summary has no output folder to read records from", field="run")
        self._same_sweep()
        reader = (self._record_class(entry.task) if self._record_class else PlainRecord).from_json
        recs = ResultsFolder(self._folder).read_records(entry.key, reader)
        if recs is None:
            raise InputError("missing or unreadable", file=str(ResultsFolder(self._folder).results_file(entry.key)))
        return recs

    def dataframe(self, run: str | None = None, setting: str | None = None) -> Any:
        """Every record of the runs (or one run, or one setting) as a pandas DataFrame: one row per item and run,
        with `run` and `setting` columns. Needs pandas (pip install 'offline-eval[pandas]')."""
        try:
            import pandas as pd
        except ImportError:
            raise MissingExtraError("pandas", "pandas", "library") from None
        chosen = [r for r in self.runs if (run is None or r.run == run) and (setting is None or r.setting == setting)]
        if not chosen:
            asked = ", ".join(f"{k} {v!r}" for k, v in (("run", run), ("setting", setting)) if v is not None)
            raise InputError(f"no {asked} in this summary", field="run" if run is not None else "setting")
        rows = [
            {"run": r.run, "setting": r.setting, **rec.to_json()}
            for r in chosen
            for rec in self.records(r.run, r.setting)
        ]
        return pd.DataFrame(rows)

    def _same_sweep(self) -> None:
        """Records read now belong to the sweep this summary was read from: refused while another sweep writes
        into the folder, or once one has rewritten summary.json since."""

        assert self._folder is not None
        if who := holder(self._folder):
            raise InputError(
                f"a sweep is writing into this folder ({who}): load it again once it has finished",
                file=str(self._folder),
            )
        if self._generation is not None and _generation(self._folder / "summary.json") != self._generation:
            raise InputError(
                "summary.json was rewritten since it was loaded: load the folder again", file=str(self._folder)
            )

    def to_json(self) -> dict[str, Any]:
        """What summary.json holds (keys a part left unset are left out, as they were written)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def write(self, path: str | Path, record_class: RecordClass | None = None) -> None:
        write_json_atomic(path, self.to_json())
        self._folder = Path(path).parent
        self._record_class = record_class

    @classmethod
    def read(cls, path: str | Path, record_class: RecordClass | None = None) -> Summary:
        """summary.json, checked whole; any problem is one line naming the file and the field. `record_class` types
        the records its runs read back (`records`, `dataframe`): the task registry's, handed in (without it, the
        generic fields only)."""
        p = Path(path)
        if not p.is_file():
            raise InputError("no summary.json here; run a sweep into this folder first", file=str(p.parent))
        generation = _generation(p)
        try:
            raw = json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(f"unreadable summary.json ({e})", file=str(p)) from None
        summary = cls.parse(raw, str(p))
        summary._folder = p.parent
        summary._generation = generation
        summary._record_class = record_class
        if note := summary.migration_note():
            print(f"offline-eval: {note}", file=sys.stderr)  # every reader (load, report, verify...) says it once
        return summary

    @classmethod
    def parse(cls, raw: Any, source: str) -> Summary:
        if not isinstance(raw, dict) or not isinstance(raw.get("runs"), list):
            raise InputError("not an offline-eval summary (expected an object with a `runs` list)", file=source)
        version = raw.get("schema_version", raw.get("version"))
        old = version if isinstance(version, int) and OLDEST_READ <= version < SCHEMA_VERSION else None
        if old is not None:
            raw = forward(raw, old, SCHEMA_VERSION, RunEntry.model_fields.keys())
            version = raw.get("schema_version")
        if version != SCHEMA_VERSION:
            writer = ((raw.get("provenance") or {}).get("sweep") or {}).get("offline_eval_version")
            raise InputError(
                f"written by {f'offline-eval {writer}' if writer else 'another offline-eval'} in summary schema "
                f"version {version!r}; this one reads versions {OLDEST_READ} to {SCHEMA_VERSION}: re-run the sweep into "
                f"this folder "
                f"(its store serves every output it holds, nothing is generated again)",
                file=source,
                field="schema_version",
            )
        try:
            summary = cls.model_validate(raw)
        except ValidationError as e:
            raise format_validation_error(e, source) from None
        summary._read_from = old
        return summary


def _generation(path: Path) -> tuple[int, int, int] | None:
    """summary.json is replaced atomically (a new inode) whenever a sweep writes it."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of summary.json (what offline_eval/schemas/summary.schema.json holds)."""
    schema = Summary.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = f"offline-eval summary.json, schema version {SCHEMA_VERSION}"
    return schema


SCHEMA_FILE = Path(__file__).parent.parent / "schemas" / "summary.schema.json"
