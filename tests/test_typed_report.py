"""The report reads the typed Summary: no string-key reads of summary data in report/, sections.py, figures.py and
the tasks' report modules (issue 32). A read is a subscript by a string literal (`r["run"]`) or a `.get("...")`
call, found in the code's syntax tree, so a comment or a string cannot hide one and a new one cannot slip in."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "offline_eval"
FILES = [
    *sorted((PACKAGE / "report").glob("*.py")),
    PACKAGE / "tasks" / "kit" / "sections.py",
    PACKAGE / "tasks" / "kit" / "figures.py",
    *sorted(PACKAGE.glob("tasks/*/report.py")),
]
# Reads of data that is not the summary's, each with its reason.
NOT_SUMMARY = {
    ("report/browser.py", "data.get('texts')"): "the browser's own payload, built a few lines above",
    ("report/inputs.py", "it['id']"): "a planned item of the sweep (items are still dicts)",
}


def _metric_by_name(node: ast.Call) -> bool:
    """`r.metrics.get("n_skipped")`, or `metrics.get("mean")` after `metrics = r.metrics`: a metric of the run's
    typed RunMetrics, by its name (the names are not declared once yet)."""
    recv = node.func.value  # type: ignore[attr-defined]
    return (isinstance(recv, ast.Name) and recv.id == "metrics") or (
        isinstance(recv, ast.Attribute) and recv.attr == "metrics"
    )


# A task's ReportParts.browser_view reads one item's record (a results file's line), never summary data.
RECORD_VIEWS = {"browser_view"}


def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node, less the bodies of the record views."""
    out: list[ast.AST] = []
    todo = [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.FunctionDef) and node.name in RECORD_VIEWS:
            continue
        todo.extend(ast.iter_child_nodes(node))
    return out


def string_key_reads(path: Path) -> list[str]:
    reads = []
    for node in sorted(_nodes(ast.parse(path.read_text(encoding="utf-8"))), key=_position):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.slice, ast.Constant)
            and isinstance(node.slice.value, str)
        ):
            reads.append(ast.unparse(node))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
            and not _metric_by_name(node)
        ):
            reads.append(ast.unparse(node))
    return reads


def _position(node: ast.AST) -> tuple[int, int]:
    return getattr(node, "lineno", 0), getattr(node, "col_offset", 0)


def test_the_report_reads_no_summary_data_by_string_keys():
    found = {}
    for f in FILES:
        name = str(f.relative_to(PACKAGE))
        reads = [r for r in string_key_reads(f) if (name, r) not in NOT_SUMMARY]
        if reads:
            found[name] = reads
    assert found == {}
    assert len(FILES) >= 13  # the scan saw the modules it is about


def test_the_scan_finds_what_it_looks_for(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        'def f(summary, r, m, metrics):\n    # r["not this"]\n    x = "r[\'nor this\']"\n'
        '    return summary["runs"], r.get("throughput"), m.get("mean"), metrics.get("mean"), r.metrics.get("n")\n'
        "def browser_view(record):\n    return record.scores['correct']\n"
        "def tables(record):\n    return record.scores['correct']\n",
        encoding="utf-8",
    )
    assert string_key_reads(planted) == [
        "summary['runs']",
        "r.get('throughput')",
        "m.get('mean')",
        "record.scores['correct']",  # outside a record view: counted
    ]
