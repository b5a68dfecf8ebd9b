"""The Japanese report (`--lang ja`): every message we mark has a Japanese entry with the same named fields, the
demo's folder rendered in both languages shows the same numbers, no English sentence is left in the Japanese one,
English stays the msgid itself, and an unknown language is one line with exit 2."""

from __future__ import annotations

import collections
import re
import shutil
import string
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_cli

pytest.importorskip("babel")
sys.path.insert(0, str(ROOT / "scripts"))

import catalogue  # noqa: E402

from offline_eval.runtime import i18n  # noqa: E402

DEMO = ROOT / "tests" / "fixtures" / "v3-demo"


def _fields(text: str) -> set[str]:
    return {name for _lit, name, _spec, _conv in string.Formatter().parse(text) if name is not None}


def _strings(m) -> list[str]:  # type: ignore[no-untyped-def]
    return list(m.string) if isinstance(m.string, tuple) else [m.string]


def test_every_message_we_mark_has_a_japanese_entry_with_its_named_fields():
    """Run `scripts/catalogue.py` to add the new messages to the .po, then translate them."""
    have = {(m.id, m.context): m for m in catalogue.read("ja") if m.id}
    missing, fields, fuzzy = [], [], []
    for m in catalogue.extract():
        if not m.id:
            continue
        ids = list(m.id) if isinstance(m.id, tuple) else [m.id]
        got = have.get((m.id, m.context))
        if got is None or not all(_strings(got)):
            missing.append(ids[0])
            continue
        if got.fuzzy:
            fuzzy.append(ids[0])
        want = set().union(*map(_fields, ids))
        # a plural's translation may leave {n} out (Japanese has one form); no translation may name another field
        if any(not (_fields(s) == want or (len(ids) > 1 and _fields(s) == want - {"n"})) for s in _strings(got)):
            fields.append(ids[0])
    assert not missing, f"{len(missing)} messages have no Japanese entry, e.g. {missing[:5]}"
    assert not fields, f"translations whose named fields differ from the English: {fields[:5]}"
    assert not fuzzy, f"fuzzy entries: {fuzzy[:5]}"


def _digits(text: str) -> collections.Counter[str]:
    return collections.Counter(re.findall(r"\d+(?:\.\d+)?", re.sub(r"\{[^{}]*\}", " ", text)))


def test_a_translation_writes_the_numbers_its_english_writes_and_no_other():
    """A number is never translated away or added (「1つの」 for "a"): the same numbers in both languages."""
    differ = []
    for m in catalogue.read("ja"):
        ids = list(m.id) if isinstance(m.id, tuple) else [m.id]
        if m.id and any(_digits(s) not in (_digits(ids[0]), _digits(ids[-1])) for s in _strings(m) if s):
            differ.append((ids[0], _strings(m)))
        if m.id and any(set(re.findall(r"[０-９]", s)) - set(re.findall(r"[０-９]", ids[0])) for s in _strings(m)):
            differ.append((ids[0], _strings(m)))
    assert not differ, differ[:5]


def test_the_catalogue_holds_no_message_the_code_no_longer_writes():
    marked = {(m.id, m.context) for m in catalogue.extract() if m.id}
    stale = [m.id for m in catalogue.read("ja") if m.id and (m.id, m.context) not in marked]
    assert not stale, f"run scripts/catalogue.py to drop them: {stale[:5]}"


def test_english_is_the_message_itself_and_japanese_comes_from_the_catalogue():
    assert i18n._("{n} shared items", n=3) == "3 shared items"
    with i18n.language("ja"):
        assert i18n._("{n} shared items", n=3) == "共通の設問 3件"
        assert i18n._("inconclusive") == "判定保留"
        assert i18n._("") == ""  # not the catalogue's header
    assert i18n.current() == "en"
    with pytest.raises(i18n.UnknownLanguage, match="unknown language 'fr': offline-eval writes en or ja"):
        i18n.checked("fr")


@pytest.fixture
def both(demo_in_both_languages: dict[str, Path]) -> dict[str, Path]:
    return demo_in_both_languages


# A number, wherever it stands: Japanese puts no space between a number and its word (約189件).
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])[-+−]?\d+(?:[.,]\d+)*%?")


def _visible(html_text: str) -> str:
    """The text a reader sees: tags, scripts, styles and the embedded images dropped."""
    text = re.sub(r"<(script|style)\b.*?</\1>", " ", html_text, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", text)
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&").replace("&#x27;", "'")


def _numbers(text: str) -> collections.Counter[str]:
    return collections.Counter(_NUMBER.findall(text))


def test_the_japanese_report_shows_the_same_numbers_as_the_english(both):
    for name in ("report.md", "report.html"):
        en, ja = ((both[x] / name).read_text("utf-8") for x in ("en", "ja"))
        if name == "report.html":
            en, ja = _visible(en), _visible(ja)
        en_n, ja_n = _numbers(en), _numbers(ja)
        assert en_n == ja_n, (name, (en_n - ja_n).most_common(8), (ja_n - en_n).most_common(8))
    # no full-width digit of ours (the data's own ids keep theirs: 令和５年-民法-１８-１)
    wide = [len(re.findall(r"[０-９]", (both[x] / "report.md").read_text("utf-8"))) for x in ("en", "ja")]
    assert wide[0] == wide[1], wide


def _names(folder: Path) -> set[str]:
    """What stays as written in every language: the sweep's own names (runs, models, variants, engines, settings,
    tasks, metrics), read from its summary."""
    import json

    raw = json.loads((folder / "summary.json").read_text("utf-8"))
    names: set[str] = set()

    def walk(v: object, key: str = "") -> None:
        if isinstance(v, dict):
            for k, x in v.items():
                if key in {"metrics", "values", "breakdowns", "libraries", "groups", "criteria", "judges"}:
                    names.add(str(k))  # a metric's, a group's, a library's own name
                walk(x, str(k))
        elif isinstance(v, list):
            for x in v:
                walk(x, key)
        elif isinstance(v, str) and key in {"run", "model", "variant", "backend", "setting", "task", "metric",
                                            "reference", "against", "name", "primary_metric", "protocol", "engine_version"}:  # fmt: skip
            names.add(v)

    walk(raw)
    return {n for n in names if n}


# Words that stay English in the Japanese report: codes and values (protocol, prompt format, constraint kind,
# overflow policy), the authors' field names, method, library and hardware names (docs/glossary-ja.md).
KEPT = set(
    "offline-eval paper protocol MB CI PPI Tango LoRA BF16 Int8 Int4 ctx F1 AdjScore Avg GGUF JBE-QA LegalRikai "
    "LegalEval-Q AmendExp StatRev ReqRev RiskRev constrained free logprob shot none nan true false chat plain "
    "choice json focus Comment Conclusion mu sigma min max McNemar Wilcoxon Bonferroni Holm Benjamini-Hochberg "
    "Hodges-Lehmann Cohen Cohen's pBonf pHolm qBH ICC bca krippendorff Krippendorff CPU GPU GPUs RAM AMD EPYC Intel "
    "NVIDIA nvidia-smi Python git cpu metrics sweep".split()
)


def _prose(text: str) -> str:
    """The words of a page that are prose: the embedded images, comments, code spans, paths, file names, dotted
    keys and digests taken out."""
    for pattern in (r"data:image/png;base64,[A-Za-z0-9+/=]+", r"<!--.*?-->", r"`[^`]*`", r"\S*/\S*",
                    r"[\w.<>-]*\.(?:jsonl|json|csv|png|md|html|yaml|safetensors|stamp|gguf|py|js)\b", r"\(#[\w-]+\)", r"\S*\d\S*", r"[\w<>]+(?:\.[\w<>]+)+",
                    r"\b(?=\w*\d)[0-9a-f]{6,}\b", r"\b[A-Za-z]\w*_\w+\b", r"\S+==\S+"):  # fmt: skip
        text = re.sub(pattern, " ", text, flags=re.S)
    return text


def english_left(folder: Path) -> dict[str, list[tuple[str, int]]]:
    """The English words left in a folder's Japanese report.md and report.html that are neither the sweep's own
    names nor kept as they are (KEPT), most frequent first."""
    names = sorted(_names(folder), key=len, reverse=True)
    left = {}
    for name in ("report.md", "report.html"):
        text = (folder / name).read_text("utf-8")
        if name == "report.html":
            text = _visible(text)
        for n in names:
            text = re.sub(rf"(?<![A-Za-z0-9_]){re.escape(n)}(?![A-Za-z0-9_])", " ", text)
        text = _prose(text)
        words = collections.Counter(w.strip("'-") for w in re.findall(r"[A-Za-z][A-Za-z'-]{2,}", text))
        if found := {w: n for w, n in words.items() if w not in KEPT and len(w) > 2}:
            left[name] = collections.Counter(found).most_common(30)
    return left


def test_no_english_sentence_is_left_in_the_japanese_report(both):
    assert english_left(both["ja"]) == {}
    md = (both["ja"] / "report.md").read_text("utf-8")
    for word in ("non-inferior", "inferior", "inconclusive"):
        assert word not in md


def test_the_language_is_recorded_and_english_is_the_default(both):
    from offline_eval.report.write import report_language

    assert report_language(both["en"] / "report.md") == "en"
    assert report_language(both["ja"] / "report.md") == "ja"
    assert '<html lang="ja">' in (both["ja"] / "report.html").read_text("utf-8")
    assert (both["en"] / "report.md").read_text("utf-8").startswith("# offline-eval report\n")
    assert (both["ja"] / "report.md").read_text("utf-8").startswith("# offline-eval レポート\n")


@pytest.mark.parametrize("command", [["report", "{dir}"], ["sweep", "{dir}/none.yaml"], ["annotate", "{dir}",
                                     "--task", "legalrikai"], ["compare", "{dir}", "{dir}"]])  # fmt: skip
def test_an_unknown_language_is_one_line_and_exit_2(tmp_path, command):
    shutil.copytree(DEMO, tmp_path / "d")
    got = run_cli(*[c.format(dir=tmp_path / "d") for c in command], "--lang", "xx")
    assert got.returncode == 2, got.stderr
    assert got.stderr.strip().splitlines() == [
        "offline-eval: error: unknown language 'xx': offline-eval writes en or ja"
    ], got.stderr
    assert not (tmp_path / "d" / "report.md").read_text("utf-8").endswith(" xx -->\n")


def _kept_messages() -> list[str]:
    """Every message the code marks kept(): what a file stores in English and a page reads back."""
    from babel.messages.extract import extract_from_dir

    found = extract_from_dir(str(ROOT / "offline_eval"), method_map=[("**.py", "python")], keywords={"kept": None})
    return sorted({m for _f, _l, m, _c, _x in found})


def test_every_stored_text_is_read_back_into_its_japanese_on_every_page():
    """Drawing a report, compare's page or an annotation page imports every module that writes a stored text
    (kept()), so that i18n.said() knows each; a text filled in from any of them reads back as its translation."""
    import offline_eval.annotate  # noqa: F401
    import offline_eval.comparison  # noqa: F401
    import offline_eval.report.write  # noqa: F401
    from offline_eval.tasks import task_classes

    task_classes()
    kept = _kept_messages()
    assert len(kept) > 40
    assert not [m for m in kept if m not in i18n._KEPT], "kept() in a module no page imports"
    for message in kept:
        sample = {f: f"V{k}" for k, f in enumerate(sorted(_fields(message)))}
        text = message.format(**sample) if sample else message
        assert i18n.said(text) == text  # English: the stored text itself
        with i18n.language("ja"):
            assert i18n.said(text) == i18n._(message, **sample) != text, message
    assert i18n.said("no labels: its human mean is unknown") == "no labels: its human mean is unknown"
    two = "no labels in stratum 'a': its human mean is unknown; 1 label in stratum 'b': an interval needs 2 or more"
    with i18n.language("ja"):
        assert (
            i18n.said(two) == "層「a」にラベルなし：人手平均は不明です；層「b」のラベル1件：区間には2件以上が必要です"
        )
        assert i18n.said("no labels: its human mean is unknown") == "ラベルなし：人手平均は不明です"  # an empty field
        nested = "m.x: a thinking budget of 64 (the paper's: the context // 4, 1024)"
        assert i18n.said(nested) == "m.x：思考トークン上限 64（論文では、コンテキスト長 // 4 = 1024）"
        assert i18n.said("CUDA out of memory") == "CUDA out of memory"  # an engine's own words stay


def test_no_message_is_hidden_from_the_catalogue_inside_an_f_string():
    """Babel reads no _("...") inside an f-string's braces: such a message would stay English, unseen."""
    hidden = []
    for path in sorted((ROOT / "offline_eval").rglob("*.py")):
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1):
            if re.search(r"""\bf["'][^"']*\{[^}]*\b(_|ngettext|pgettext)\(\s*["']""", line):
                hidden.append(f"{path.relative_to(ROOT)}:{n}")
    assert not hidden, hidden
