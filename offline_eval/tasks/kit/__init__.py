"""What a task is built from, in one place: items and their files, requests and results, records, the declared-metric
vocabulary, report parts and figures, evaluators and annotation. A task imports from here and from `tasks.base`."""

from offline_eval.inference.constraints import Choice, Constraint, JsonSchema
from offline_eval.inference.requests import Phase, Request, Result, Sampling, shared_chars
from offline_eval.metrics.bootstrap import MAX_BOOTSTRAP, Bootstrapped
from offline_eval.metrics.declared import Breakdown
from offline_eval.metrics.values import EVERY_TASK, N_SKIPPED, Count, MetricValue, Number, RunMetrics
from offline_eval.results.records import UNSET, JsonRecord, Records, RunEntry, TaskReport, Unset, output_key
from offline_eval.runtime.errors import InputError

from .annotation import Case, Doc, Form, case_id
from .datafiles import ItemT, TaskItem, has_split, note, read_items, read_table, resolve_split
from .evaluation import Evaluation
from .figures import Plot
from .judges import Criterion
from .parts import ReportParts, TaskClass
from .protocol import DEFAULT_PROTOCOL, OURS, Protocol, Source, protocol_field
from .sections import BrowserView, Metric, Table

__all__ = [
    "DEFAULT_PROTOCOL",
    "EVERY_TASK",
    "MAX_BOOTSTRAP",
    "N_SKIPPED",
    "OURS",
    "UNSET",
    "Bootstrapped",
    "Breakdown",
    "BrowserView",
    "Case",
    "Choice",
    "Constraint",
    "Count",
    "Criterion",
    "Doc",
    "Evaluation",
    "Form",
    "InputError",
    "ItemT",
    "JsonRecord",
    "JsonSchema",
    "Metric",
    "MetricValue",
    "Number",
    "Phase",
    "Plot",
    "Protocol",
    "Records",
    "ReportParts",
    "Request",
    "Result",
    "RunEntry",
    "RunMetrics",
    "Sampling",
    "Source",
    "Table",
    "TaskClass",
    "TaskItem",
    "TaskReport",
    "Unset",
    "case_id",
    "has_split",
    "note",
    "output_key",
    "protocol_field",
    "read_items",
    "read_table",
    "resolve_split",
    "shared_chars",
]
