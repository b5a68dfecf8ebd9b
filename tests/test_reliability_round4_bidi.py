"""Model output and data in report.html are isolated for bidirectional text (issue 49): a right-to-left override
(U+202E) in a failed run's reason (a weights path) stays inside its own <bdi>, cells and blocks isolate, and the
item browser's heading wraps each data string in FSI ... PDI (tests/test_report_browser.py checks it rendered)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import yaml
from conftest import DATA, run_cli

RLO = "\u202e"


class _Outside(HTMLParser):
    """Text that holds a bidi control outside any <bdi>."""

    def __init__(self) -> None:
        super().__init__()
        self.depth, self.found = 0, []  # type: ignore[var-annotated]

    def handle_starttag(self, tag: str, attrs: object) -> None:
        self.depth += tag == "bdi"

    def handle_endtag(self, tag: str) -> None:
        self.depth -= tag == "bdi"

    def handle_data(self, data: str) -> None:
        if RLO in data and not self.depth:
            self.found.append(data)


def test_report_html_isolates_a_right_to_left_override_in_a_failure_reason(tmp_path: Path) -> None:
    (tmp_path / "w.bin").write_text("fake weights")
    cfg = {
        "output_dir": str(tmp_path / "out"),
        "models": [
            {"name": "ok", "backend": "fake", "path": str(tmp_path / "w.bin"), "max_model_len": 4096},
            {"name": "gone", "backend": "fake", "path": str(tmp_path / f"model{RLO}fdp.exe"), "max_model_len": 4096},
        ],
        "tasks": {
            "jbeqa": {"protocol": "offline-eval", "data": str(DATA), "shots": [0], "mode": ["constrained"], "limit": 3}
        },
    }
    path = tmp_path / "m.yaml"
    path.write_text(yaml.safe_dump(cfg, allow_unicode=True), encoding="utf-8")
    got = run_cli("sweep", str(path))
    assert got.returncode == 1, got.stderr[-2000:]  # one run failed; the sweep went on
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    static = re.sub(r"<script.*?</script>", "", page, flags=re.S)  # the item browser's data is a JSON payload
    assert f"model{RLO}fdp.exe" in static  # the data as it is, as text, in the failed runs' list
    p = _Outside()
    p.feed(static)
    assert p.found == []
    css = re.search(r"<style>(.*?)</style>", page, re.S)
    assert css and "unicode-bidi:isolate" in css.group(1)
