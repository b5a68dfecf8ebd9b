"""Statistics declared once: a metric with a clustered interval is one declaration on the task, and the framework
(metrics.declared.with_intervals, called by Task.run_metrics) gives it its value, interval, design effect and
breakdowns. This is docs/architecture.md's worked example ("A new statistic"), run as a real task."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sklearn.metrics import balanced_accuracy_score

from offline_eval.inference.requests import Result
from offline_eval.metrics.bootstrap import Bootstrapped, Clusters, clustered_cis
from offline_eval.metrics.declared import Breakdown
from offline_eval.tasks import make_task
from offline_eval.tasks.jbeqa import JBEQATask
from offline_eval.tasks.kit.sections import Metric


# ---- the worked example, as docs/architecture.md gives it
def balanced_columns(records: Sequence[Any]) -> np.ndarray:
    """Each statement's (tp, fn, tn, fp)."""
    g = np.array([bool(r.gold) for r in records])
    p = np.array([bool(r.pred) for r in records])
    return np.column_stack([g & p, g & ~p, ~g & ~p, ~g & p]).astype(float)


def balanced_of(s: np.ndarray) -> np.ndarray:
    """Summed (tp, fn, tn, fp): the mean of the recalls of true and of false."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return 0.5 * (s[:, 0] / (s[:, 0] + s[:, 1]) + s[:, 2] / (s[:, 2] + s[:, 3]))


class WithBalanced(JBEQATask):
    metrics = (
        *JBEQATask.metrics,
        Metric("balanced_accuracy", "balanced accuracy", ci=Bootstrapped(balanced_columns, balanced_of)),
    )
    breakdowns = (*JBEQATask.breakdowns, Breakdown("subject", "balanced_accuracy", lambda r: r.subject))


# ---- the test
SUBJECTS = {"民法": "Civil Law", "刑法": "Criminal Law", "憲法": "Constitution"}


def _release(tmp: Path) -> Path:
    rng = np.random.default_rng(5)
    rows = []
    for q in range(1, 49):
        subj = list(SUBJECTS)[q % 3]
        for st in range(1, int(rng.integers(2, 6))):
            rows.append(
                {
                    "id": f"令和５年-{subj}-{q}-{st}",
                    "year": "令和５年",
                    "subject": SUBJECTS[subj],
                    "subject_jp": subj,
                    "theme": "None",
                    "question_type": "TFQ",
                    "instruction": "次の記述の正誤を判断しなさい。",
                    "remark": "",
                    "label": "Y" if (ans := bool(rng.random() < 0.476)) else "N",
                    "lead_in": "",
                    "question": f"問{q}の記述{st}",
                    "answer": ans,
                }
            )
    (tmp / "test.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    return tmp


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Any, Any, list[Any], dict[str, Any]]:
    opts = {"protocol": "offline-eval", "data": str(_release(tmp_path)), "mode": ["free"], "bootstrap": 600, "seed": 4}
    plain, extended = make_task("jbeqa", opts), WithBalanced.from_options(opts)
    setting = {"shots": 0, "mode": "free"}
    rng = np.random.default_rng(9)
    records = [plain.score(it, Result(text=str(rng.choice(["0", "1", "1"]))), setting) for it in plain.load()]
    return plain, extended, records, setting


def test_a_declared_statistic_gets_its_value_interval_and_breakdown_with_no_other_code(runs):
    _, task, records, setting = runs
    m = task.run_metrics(records, setting)
    gold, pred = [bool(r.gold) for r in records], [bool(r.pred) for r in records]
    got = m.metric("balanced_accuracy")
    assert got is not None and got.value == round(balanced_accuracy_score(gold, pred), 6)  # sklearn's, the oracle
    # Its interval: the clustered bootstrap over the exam questions, as computed by hand from the same draws.
    clusters = Clusters.of([task.cluster_of(r) for r in records])
    want = clustered_cis(
        {
            **{x.name: (x.ci.columns(records), x.ci.of) for x in JBEQATask.metrics if x.ci is not None},
            "balanced_accuracy": (balanced_columns(records), balanced_of),
        },
        clusters,
        n_resamples=600,
        seed=4,
    ).intervals["balanced_accuracy"]
    assert got.n_clusters == clusters.n == 48
    assert (got.ci_low, got.ci_high) == (round(want.low, 6), round(want.high, 6))
    assert got.ci_low < got.value < got.ci_high
    assert got.design_effect is None  # only the primary metric's is estimated
    # Per subject: its value on the subject's statements alone, with an interval over that subject's questions.
    by = m.groups("subject", "balanced_accuracy")
    assert set(by) == set(SUBJECTS)  # the record keeps the Japanese subject
    for subject, v in by.items():
        sub = [r for r in records if r.subject == subject]
        oracle = balanced_accuracy_score([bool(r.gold) for r in sub], [bool(r.pred) for r in sub])
        assert v.value == round(oracle, 6) and v.n_clusters == 16 and v.note == "n too small"


def test_a_statistic_added_last_leaves_every_other_number_as_it_was(runs):
    """The clusters are drawn in an order set by the declared columns in turn, so a metric appended to the
    declarations changes no earlier metric's interval: a folder swept before it still verifies."""
    plain, task, records, setting = runs
    before = plain.run_metrics(records, setting).model_dump()
    after = task.run_metrics(records, setting).model_dump()
    del after["values"]["balanced_accuracy"]
    for group in after["breakdowns"]["subject"].values():
        del group["balanced_accuracy"]
    assert after == before
    f1 = plain.run_metrics(records, setting).metric("f1")
    assert f1 is not None and f1.ci_low is not None and f1.design_effect is not None


def test_every_task_declares_its_intervals_and_none_computes_its_own():
    """The three tasks' intervals come from their declarations: no task module calls the bootstrap itself."""
    import sys

    from offline_eval.tasks import get_task_class, task_names

    for name in task_names():
        cls = get_task_class(name)
        declared = [x.name for x in cls.metrics if x.ci is not None]
        assert cls.primary_metric in declared, name
        package = Path(sys.modules[cls.__module__].__file__ or "").parent  # every module of the task, not task.py
        for module in package.rglob("*.py"):
            src = module.read_text("utf-8")
            assert not any(x in src for x in ("clustered_cis", "Clusters.of", "resample(", "trusted(")), module


def test_the_paired_metric_is_declared_once_its_item_score_and_statistic_derived():
    """Each task's item score and the statistic its paired tests compare come from its paired metric's
    declaration: LegalEval-Q's AdjScore over the quality scores equals mu^2 / (mu + sigma) by hand and the value
    the declaration gives the run; a mean is the paired tests' own case (None); a pooled metric is refused."""
    from types import SimpleNamespace

    from offline_eval.tasks import get_task_class, task_names

    rng = np.random.default_rng(5)
    q = rng.uniform(20, 90, size=37)
    records = [SimpleNamespace(scores={"quality": float(v)}) for v in q]
    adj = get_task_class("legalevalq").paired_statistic()
    assert adj is not None and adj.item is not None
    mu, sigma = q.mean(), q.std()  # the population std, as the paper's AdjScore
    assert adj(q) == pytest.approx(mu * mu / (mu + sigma), rel=1e-12)
    assert adj(q) == pytest.approx(adj.value(records), rel=1e-12)
    assert [adj.item(r) for r in records[:3]] == q[:3].tolist()
    assert adj.item(SimpleNamespace(scores={})) is None  # not scored: does not count
    for name in task_names():
        cls = get_task_class(name)
        decl = cls.paired_declaration()
        assert decl is cls.noninferiority_metric().ci and decl.item is not None
        assert cls.paired_statistic() is (None if decl.is_mean else decl)

    class PooledOnly(JBEQATask):
        paired_metric = "f1"

    with pytest.raises(TypeError, match="'f1' declares no per-item score"):
        PooledOnly(JBEQATask.Options.model_validate({"data": "x", "protocol": "offline-eval"}))


def _metric_reads_by_name(source: str) -> list[str]:
    """Reads of a run's metrics by a name spelled out (`metrics.get("n_skipped")`, `m["score"]`,
    `"samples" in metrics`), where `m` is any name bound to an expression's `.metrics`."""
    import ast

    tree = ast.parse(source)
    bound = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Attribute) and n.value.attr == "metrics"
        for t in n.targets
        if isinstance(t, ast.Name)
    }

    def is_metrics(e: ast.expr) -> bool:
        return (isinstance(e, ast.Attribute) and e.attr == "metrics") or (isinstance(e, ast.Name) and e.id in bound)

    def literal(e: ast.expr) -> bool:
        return isinstance(e, (ast.Constant, ast.JoinedStr)) and not isinstance(getattr(e, "value", ""), int)

    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("get", "metric"):
            hit = is_metrics(n.func.value) and bool(n.args) and literal(n.args[0])
        elif isinstance(n, ast.Subscript):
            hit = is_metrics(n.value) and literal(n.slice)
        elif isinstance(n, ast.Compare) and isinstance(n.ops[0], (ast.In, ast.NotIn)):
            hit = is_metrics(n.comparators[0]) and literal(n.left)
        else:
            hit = False
        if hit:
            found.append(f"{n.lineno}: {ast.unparse(n)}")
    return found


def test_no_value_is_read_by_a_name_spelled_again():
    """Every value a run holds is declared (a task's metrics and counts, and those of every task), and read
    through its declaration; the scan finds a planted read, and version 3's reader (flat.py) is the one exception."""
    planted = (
        "def f(entry, r):\n    m = entry.metrics\n    return m.get('n_skipped'), r.metrics['score'], 'samples' in m\n"
    )
    assert len(_metric_reads_by_name(planted)) == 3
    assert (
        _metric_reads_by_name("def f(r):\n    return N_SKIPPED.of(r.metrics), r.metrics.get(r.primary_metric)\n") == []
    )
    package = Path(__file__).resolve().parent.parent / "offline_eval"
    found = {
        str(p.relative_to(package)): hits
        for p in sorted(package.rglob("*.py"))
        if p.name != "flat.py" and (hits := _metric_reads_by_name(p.read_text("utf-8")))
    }
    assert found == {}


def test_a_value_a_task_does_not_declare_fails_its_run():
    from offline_eval.tasks.kit import RunMetrics

    class Undeclared(JBEQATask):
        def aggregate(self, records: Any, setting: Any) -> RunMetrics:
            m = super().aggregate(records, setting)
            m.put("n_mystery", 1)
            return m

    task = Undeclared(JBEQATask.Options.model_validate({"data": "x", "protocol": "offline-eval"}))
    with pytest.raises(TypeError, match=r"does not declare .*\['n_mystery'\]"):
        task.run_metrics([], {"shots": 0, "mode": "constrained"})
    assert {"n_skipped", "n_clusters", "answered_true", "samples"} <= JBEQATask.declared_names()


# ---- the task skeleton of docs/architecture.md, run as a real task
DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"


def skeleton_source() -> str:
    text = DOC.read_text("utf-8")
    block = text.split("<!-- skeleton -->", 1)[1].split("<!-- /skeleton -->", 1)[0]
    return block.strip().removeprefix("```python").removesuffix("```")


def test_the_skeleton_imports_the_kit_and_the_base_only():
    import ast

    tree = ast.parse(skeleton_source())
    ours = {
        n.module
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and (n.module or "").startswith("offline_eval")
    }
    assert ours == {"offline_eval.tasks.kit", "offline_eval.tasks.base"}


@pytest.fixture
def shortqa(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The skeleton, copied as it stands into a task package that the registry finds beside the shipped ones."""
    import offline_eval.tasks as tasks

    pkg = tmp_path / "taskpkgs"
    (pkg / "shortqa").mkdir(parents=True)
    (pkg / "shortqa" / "__init__.py").write_text(skeleton_source(), "utf-8")
    monkeypatch.setattr(tasks, "__path__", [*tasks.__path__, str(pkg)])
    tasks._tasks.cache_clear()
    yield
    tasks._tasks.cache_clear()
    import sys

    sys.modules.pop("offline_eval.tasks.shortqa", None)


def test_the_task_skeleton_is_a_whole_task(shortqa, tmp_path: Path):
    import yaml

    import offline_eval
    from offline_eval.verify import verify

    rows = [
        {"id": f"q{g}-{i}", "group": f"g{g}", "question": f"問{g}-{i}", "answer": "はい" if (g + i) % 3 else "いいえ"}
        for g in range(30)
        for i in range(2)
    ]
    data = tmp_path / "shortqa.jsonl"
    data.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    (tmp_path / "w.bin").write_text("fake weights")
    cfg = tmp_path / "models.yaml"
    model = {"name": "m", "backend": "fake", "path": str(tmp_path / "w.bin"), "engine_args": {"default": "はい"}}
    out = tmp_path / "out"
    cfg.write_text(
        yaml.safe_dump(
            {"output_dir": str(out), "models": [model], "tasks": {"shortqa": {"data": str(data), "bootstrap": 500}}},
            allow_unicode=True,
        ),
        "utf-8",
    )
    summary = offline_eval.sweep(cfg)
    (run,) = summary.runs
    right = sum(r["answer"] == "はい" for r in rows)
    acc = run.metrics.metric("accuracy")
    assert acc is not None and acc.value == round(right / 60, 6) and run.metrics["n_scored"] == 60
    assert acc.n_clusters == 30 and acc.ci_low is not None and acc.ci_low < acc.value < acc.ci_high
    assert acc.design_effect is not None  # the primary metric's, over the 30 groups
    lines = (out / "results" / run.run / "shortqa.jsonl").read_text("utf-8").splitlines()
    assert [json.loads(x)["id"] for x in lines] == [r["id"] for r in rows]  # in the data's order
    assert "ShortQA" in (out / "report.md").read_text("utf-8")
    assert verify(out) == []


def test_a_breakdown_of_a_metric_the_task_gives_is_refused():
    """A `given` metric's value comes from the task, a group's would come from the columns: two definitions of one
    number, so the framework refuses rather than print them side by side."""
    from offline_eval.metrics.bootstrap import mean_columns, mean_of
    from offline_eval.metrics.declared import with_intervals
    from offline_eval.metrics.values import RunMetrics

    m = RunMetrics()
    m.put("score", 0.5)
    records = [{"x": float(i % 2), "g": i % 3} for i in range(30)]
    given = Bootstrapped(lambda rs: mean_columns([r["x"] for r in rs]), mean_of, 4, given=True)
    with pytest.raises(ValueError, match="breakdown g/score"):
        with_intervals(
            m,
            records,
            Clusters.singletons(30),
            [("score", given)],
            [Breakdown("g", "score", lambda r: r["g"])],
            n_resamples=0,
            seed=0,
            design_effect_of="score",
        )
