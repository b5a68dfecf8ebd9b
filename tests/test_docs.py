"""The README and docs/ hold configs the tool accepts, name every key it accepts, and link only to what exists.

Every ```yaml (or ```yml) block of README.md and docs/**/*.md is loaded as `offline-eval` loads models.yaml
(refusing repeated keys), then validated by `offline_eval.pipeline.config.parse_config` with the repository root as the
base, so `data/jbeqa` is the sample data, and each task's options by the task's own `Options` (parse_config leaves
those to the sweep's plan). Paths need not exist: `offline-eval models check` is what checks them.

What a block is, is said by a marker: an HTML comment (it renders as nothing) on the nearest non-blank line above
the opening fence.

- no marker: a whole models.yaml, a mapping with `models:` and `tasks:`, validated as it is;
- `<!-- fragment: model -->`: one entry of `models:` (a mapping) or several (a list), placed under `models:`
  beside a stand-in task;
- `<!-- fragment: models -->`: a mapping with `models:` and no `tasks:`; a stand-in task is added;
- `<!-- fragment: tasks -->`: a mapping with `tasks:` (and maybe `margin:`, `runner:`, `output_dir:`) and no
  `models:`; a stand-in model is added;
- `<!-- not a config -->`: YAML that is not models.yaml (a rubric, a record); it must only parse.

The stand-ins are the tiny GGUF (`STAND_IN_MODEL`) and the sample JBE-QA (`STAND_IN_TASKS`). Any other marker is
an error, and so is a marker that stands above no yaml block, and a block without a marker that is not a whole
config: the message names the markers. Between them the blocks must name every key models.yaml accepts (the top
level, `runner:`, a model's, an engine's own, each task's options), so a key added to the code is documented.

The README's set-up is two commands, `make demo` and `make test`, and the second is what CI (.ci/run) runs.

Every relative link (`[text](path)`, `[text](path#anchor)`, `[text](#anchor)`) in those files must lead to an
existing file, and an anchor to a heading of the page it names (GitHub's heading ids).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest
import yaml

from offline_eval.inference.backends.registry import engine_names, get_engine
from offline_eval.inference.constrained.libraries import LIBRARIES
from offline_eval.models.spec import ModelSpec
from offline_eval.pipeline.config import RunnerSpec, SweepConfig, _UniqueKeyLoader, parse_config
from offline_eval.tasks import get_task_class, task_classes

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
MIN_CONFIG_BLOCKS = 7  # README's first sweep, the reference, one per task page, a served model, a Ray model

STAND_IN_MODEL = {"name": "stand-in", "backend": "llamacpp", "path": "models/tiny/gguf/tiny-q8_0.gguf"}
STAND_IN_TASKS = {"jbeqa": {"data": "data/jbeqa"}}
KINDS = ("config", "fragment: model", "fragment: models", "fragment: tasks", "not a config")
MARKER = re.compile(r"^\s*<!--\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    page: Path
    number: int  # 1-based, among the page's yaml blocks
    line: int  # the opening fence's line, 1-based
    kind: str
    text: str

    @property
    def source(self) -> str:
        return f"{self.page.relative_to(ROOT)} block {self.number} (line {self.line})"


def _lines_outside_code(text: str, keep_code: bool = False) -> list[tuple[int, str]]:
    """(line number, line) of every line outside fenced code, with inline code spans removed (or, keep_code, only
    their backticks)."""
    out, fence = [], None
    for i, line in enumerate(text.split("\n"), 1):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)
        elif fence is not None and m and m.group(1).startswith(fence[0] * len(fence)) and not m.group(2):
            fence = None
        elif fence is None:
            out.append((i, line.replace("`", "") if keep_code else re.sub(r"`+[^`]*`+", "", line)))
    return out


def yaml_blocks(page: Path) -> list[Block]:
    lines = page.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group(1), m.group(2).lower(), i
        i += 1
        while i < len(lines) and not lines[i].lstrip().startswith(fence):
            i += 1
        if info in ("yaml", "yml"):
            above = next((lines[j] for j in range(start - 1, -1, -1) if lines[j].strip()), "")
            marker = MARKER.match(above)
            kind = marker.group(1) if marker else "config"
            text = "\n".join(lines[start + 1 : i])
            blocks.append(Block(page, len(blocks) + 1, start + 1, kind, text))
        i += 1
    return blocks


BLOCKS = [b for page in PAGES for b in yaml_blocks(page)]
CONFIGS = [b for b in BLOCKS if b.kind != "not a config"]


def _load(block: Block) -> Any:
    return yaml.load(block.text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader, as load_config's


def as_config(block: Block) -> dict[str, Any]:
    """The block as a whole models.yaml mapping, stand-ins added as its marker says."""
    raw = _load(block)
    hint = "mark a part of a config with one of " + ", ".join(f"<!-- {k} -->" for k in KINDS[1:])
    if block.kind == "fragment: model":
        entries = raw if isinstance(raw, list) else [raw]
        assert entries and all(isinstance(e, dict) for e in entries), f"{block.source}: expected model entries"
        return {"models": entries, "tasks": STAND_IN_TASKS}
    assert isinstance(raw, dict), f"{block.source}: expected a mapping; {hint}"
    if block.kind == "fragment: models":
        assert "models" in raw and "tasks" not in raw, f"{block.source}: a `models` fragment has models: only"
        return {**raw, "tasks": STAND_IN_TASKS}
    if block.kind == "fragment: tasks":
        assert "tasks" in raw and "models" not in raw, f"{block.source}: a `tasks` fragment has tasks: only"
        return {**raw, "models": [STAND_IN_MODEL]}
    assert "models" in raw and "tasks" in raw, f"{block.source}: not a whole models.yaml (models: and tasks:); {hint}"
    return raw


def _block_id(b: Block) -> str:
    return f"{b.page.relative_to(ROOT)}:{b.line}"


@pytest.mark.parametrize("block", BLOCKS, ids=_block_id)
def test_every_yaml_block_is_marked_and_parses(block: Block) -> None:
    assert block.kind in KINDS, f"{block.source}: unknown marker <!-- {block.kind} -->; one of {', '.join(KINDS)}"
    assert _load(block) is not None, f"{block.source}: empty"


def _constraint_backends(node: Any) -> set[str]:
    """Every constraint_backend a config names, at any depth (a model under models:, a task's judge)."""
    if isinstance(node, dict):
        own = {node["constraint_backend"]} if isinstance(node.get("constraint_backend"), str) else set()
        return own.union(*(_constraint_backends(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_constraint_backends(v) for v in node))
    return set()


@pytest.mark.parametrize("block", CONFIGS, ids=_block_id)
def test_every_config_example_is_one_the_tool_accepts(block: Block) -> None:
    raw = as_config(block)
    # A constraint backend whose library is not installed is refused ("needs outlines_core: pip install ..."):
    # such a block is checked where its extra is (make test), not in the fast tier.
    missing = sorted(
        f"{name} needs {LIBRARIES[name][0]} (offline-eval[{LIBRARIES[name][1]}])"
        for name in _constraint_backends(raw)
        if name in LIBRARIES and find_spec(LIBRARIES[name][0]) is None
    )
    if missing:
        pytest.skip(f"{block.source}: constraint backend {'; '.join(missing)}, not installed here")
    cfg = parse_config(raw, ROOT, block.source)
    for name, options in cfg.tasks.items():
        get_task_class(name).from_options(options, source=block.source, prefix=f"tasks.{name}")


def test_the_docs_hold_config_examples_and_markers_stand_above_them() -> None:
    assert len(CONFIGS) >= MIN_CONFIG_BLOCKS, [b.source for b in CONFIGS]
    marked = {(b.page, b.line) for b in BLOCKS}
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").split("\n")
        for i, line in _lines_outside_code("\n".join(lines)):
            m = MARKER.match(line)
            if m and m.group(1).startswith(("fragment", "not a config")):
                below = next((j for j in range(i, len(lines)) if lines[j].strip()), None)
                assert below is not None and (page, below + 1) in marked, (
                    f"{page.relative_to(ROOT)}:{i}: <!-- {m.group(1)} --> stands above no yaml block"
                )


def _keys(entries: Any) -> set[str]:
    return {k for e in entries if isinstance(e, dict) for k in e} if isinstance(entries, list) else set()


def test_the_examples_name_every_key_models_yaml_accepts() -> None:
    top: set[str] = set()
    runner: set[str] = set()
    model: set[str] = set()
    tasks: dict[str, set[str]] = {}
    for block in CONFIGS:
        raw = _load(block)
        if block.kind == "fragment: model":
            model |= _keys(raw if isinstance(raw, list) else [raw])
            continue
        top |= set(raw)
        runner |= set(raw.get("runner") or {})
        model |= _keys(raw.get("models"))
        for name, options in (raw.get("tasks") or {}).items():
            tasks.setdefault(name, set()).update(options or {})
    engines = {k for n in engine_names() if (o := get_engine(n).options) is not None for k in o.model_fields}
    missing = {
        "top level": set(SweepConfig.model_fields) - top,
        "runner": set(RunnerSpec.model_fields) - runner,
        "a model": (set(ModelSpec.model_fields) - {"engine_options"}) - model,
        "an engine's own": engines - model,
        **{f"tasks.{c.name}": set(c.Options.model_fields) - tasks.get(c.name, set()) for c in task_classes()},
    }
    assert {where: sorted(keys) for where, keys in missing.items() if keys} == {}


def _slug(heading: str) -> str:
    """GitHub's id for a heading: lower case, punctuation dropped (letters of any script, digits, _ and - kept),
    spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip()).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for _, line in _lines_outside_code(page.read_text(encoding="utf-8"), keep_code=True):
        m = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


LINK = re.compile(r"\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_leads_somewhere(page: Path) -> None:
    broken = []
    for i, line in _lines_outside_code(page.read_text(encoding="utf-8")):
        for target in LINK.findall(line):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                broken.append(f"line {i}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"line {i}: {target}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert broken == []


def test_the_readme_sets_up_with_two_commands_and_ci_runs_its_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    setup = readme[readme.index("## Set-up: two commands") :]
    setup = setup[: setup.index("\n## ", 1)]
    commands = [line.strip() for line in setup.split("\n") if line.startswith("    ") and line.strip()]
    assert commands == ["make demo", "make test"]
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").split("\n")]
    assert commands[1] in ci
