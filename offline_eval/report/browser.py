"""The item browser of report.html: every item's answers side by side across runs, filtered by run, setting,
group (the task's, e.g. the subject) and correct/incorrect. Its data is inlined as JSON; past a size limit it
goes to a sidecar script next to the report (a <script src> loads from file:// where fetch would not). Its words
are the current language's (runtime.i18n): the page's in Python, the script's written into it as string literals."""

from __future__ import annotations

import html
import json
import re
import string
from typing import Any

from offline_eval.results.records import ResultsFolder, sample_of
from offline_eval.results.summary import LoadProvenance, Summary
from offline_eval.runtime.fileio import script_json, write_text_atomic
from offline_eval.runtime.i18n import N_, _

from .inputs import ItemInputs
from .tables import task_class

INLINE_LIMIT = 20 * 2**20  # bytes of item data inlined in report.html; more goes to the sidecar
OUTPUT_CHARS = 2000  # of each raw output and extra text shown
SIDECAR = "report_items.js"


def _text(v: Any) -> str:
    s = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
    return s if len(s) <= OUTPUT_CHARS else s[:OUTPUT_CHARS] + _("… ({n} more characters)", n=len(s) - OUTPUT_CHARS)


def browser_data(folder: ResultsFolder, summary: Summary, inputs: ItemInputs | None = None) -> dict[str, Any] | None:
    """{"runs", "settings", "texts", "rows": [[id, setting index, group, gold, {run index: [output, parsed,
    correct, extra(, focused, diffs(, [thinking, its tokens, cut])))]}, prompts]]} from the results files of the summary's runs (None: no records);
    prompts ([prompt, focused prompt or null], lines indexing "texts") and diffs come from the sweep's
    `inputs`, null and absent without them."""
    entries = summary.runs
    runs = sorted({r.run for r in entries})
    settings = sorted({r.setting for r in entries})
    rows: dict[tuple[int, str], list[Any]] = {}
    for r in entries:
        task = task_class(r.task)
        recs = folder.read_records(r.key, task.Record.from_json)
        if not recs:
            continue
        view = task.report_parts.browser_view
        s, ri = settings.index(r.setting), str(runs.index(r.run))
        samples: dict[str, list[str]] = {}  # an item answered k times: shown on its first answer, with all k
        for rec in recs:
            if sample_of(rec) is not None:
                samples.setdefault(str(rec.id), []).append(_text(rec.parsed))
        for rec in recs:
            if sample_of(rec):
                continue
            v = view(rec)
            item_id = str(rec.id)
            row = rows.get((s, item_id))
            if row is None:
                prompt = inputs.prompts.get(r.setting, {}).get(item_id) if inputs else None
                row = rows[(s, item_id)] = [item_id, s, v.group, _text(rec.gold), {}, prompt]
            ok = v.correct
            answer: list[Any] = [
                _text(rec.output or ""),
                _text(rec.parsed),
                None if ok is None else int(ok),
                {k: _text(x) for k, x in v.extra.items() if x is not None}
                | (
                    {_("answers of its {n} samples", n=len(got)): " · ".join(got)}
                    if (got := samples.get(item_id))
                    else {}
                ),
            ]
            diffs = inputs.diffs.get(r.key, {}).get(item_id) if inputs else None
            diffs = {_(label): d for label, d in diffs.items()} if diffs else diffs  # a task's label: marked there
            thinking = getattr(rec, "reasoning", None)
            if v.focused or diffs or isinstance(thinking, str):
                answer += [int(v.focused), diffs or {}]
            if isinstance(thinking, str):  # shown collapsed above the answer
                answer.append([_text(thinking), rec.reasoning_tokens, int(rec.reasoning_cut is True)])  # type: ignore[attr-defined]
            row[4][ri] = answer
    if not rows:
        return None
    loads = {x.run: x for x in summary.provenance.loads} if summary.provenance else {}
    return {
        "runs": runs,
        # each run's weights digest, shortened (a served model's: its store fingerprint, the weights being remote)
        "weights": [_short(loads.get(r)) for r in runs],
        "settings": settings,
        "texts": inputs.texts if inputs else [],
        "rows": [rows[k] for k in sorted(rows)],
    }


def _short(load: LoadProvenance | None) -> str:
    if not load:
        return _("weights unknown")
    if load.weights_digest:
        return _("weights {digest}", digest=load.weights_digest[:12])
    return _("served, fingerprint {fingerprint}", fingerprint=load.store_fingerprint[:12])


def browser_html(data: dict[str, Any], folder: ResultsFolder) -> str:
    """The browser's section; the data inline, or in the sidecar file when it is too large (said on the page)."""
    payload = script_json(data)
    sidecar = folder.root / SIDECAR
    if len(payload.encode("utf-8")) <= INLINE_LIMIT:
        if sidecar.exists():
            sidecar.unlink()
        loader = f'<script id="items-data" type="application/json">{payload}</script>'
        where = ""
    else:
        write_text_atomic(sidecar, f"window.OFFLINE_EVAL_ITEMS = {payload};\n")
        loader = f'<script src="{SIDECAR}"></script>'
        said = _(
            "The item data ({size:.0f} MB) is in {sidecar} next to this report: keep the two files together.",
            size=len(payload.encode("utf-8")) / 2**20,
            sidecar=SIDECAR,
        )
        where = f"<p>{_h(said)}</p>"
    intro = _("Filter the items, then click one to see its prompt (collapsed) and every run's answer side by side.")
    if not data.get("texts"):
        intro += _(_NO_PROMPTS)
    run, setting, group, answer = (_h(x) for x in (_("run"), _("setting"), _("group"), _("answer")))
    options = "".join(
        f'<option value="{value}">{_h(_(label))}</option>'
        for value, label in (("all", N_("all")), ("correct", N_("correct")), ("incorrect", N_("incorrect")),
                             ("differ", N_("runs differ")))
    )  # fmt: skip
    title, more = _h(_("Item browser")), _h(_("show more"))
    return (
        f'<details id="browser"><summary>{title}</summary>{where}<p>{_h(intro)}</p><div id="filters">'
        f'<label>{run} <select id="f-run"></select></label> <label>{setting} <select id="f-setting"></select>'
        f'</label> <label>{group} <select id="f-group"></select></label> <label>{answer} <select id="f-answer">'
        f'{options}</select></label> <span id="f-count"></span></div><table id="items"><thead></thead><tbody>'
        f'</tbody></table><button id="more" type="button">{more}</button><div id="item-detail"></div>'
        f"</details>{loader}<script>{_script()}</script>"
    )


def _h(text: str) -> str:
    """A text of ours in the page's HTML (a translation could hold a character HTML reads)."""
    return html.escape(text, quote=False)


# After the sentence above, with the space between them (a language that puts none between sentences drops it).
_NO_PROMPTS = N_(
    " This report was rendered from the results files, which keep neither prompts nor the diffs against "
    "input contracts: the sweep's own report shows them."
)


def _literal(text: str) -> str:
    """`text` as a JS string literal that nothing in it can end the <script> with (script_json's escapes): quoted
    as the script quotes its own, '...', unless it holds a quote."""
    quoted = script_json(text)
    return quoted if "'" in text or '"' in text else f"'{quoted[1:-1]}'"


def _js(message: str, /, **fields: str) -> str:
    """A JS expression of `message` in the current language: its text as string literals and each {field} the JS
    expression given for it, joined by + (so a translation may reorder the fields; English gives the script as
    it was written before it had a language)."""
    parts: list[tuple[bool, str]] = []  # (a literal, its JS)
    for text, field, _spec, _conversion in string.Formatter().parse(_(message)):
        parts += [(True, _literal(text))] if text else []
        parts += [(False, fields[field])] if field is not None else []
    if not parts or not (parts[0][0] or (len(parts) > 1 and parts[1][0])):  # two numbers first would add up
        parts.insert(0, (True, "''"))
    return " + ".join(js for _is_text, js in parts)


def _script() -> str:
    """The browser's script, each @name@ in _JS its text in the current language."""
    focused = _js(
        N_("focused prompt, the statutes cut to their changed articles (overflow policy focus), given to {runs}"),
        runs="focused.map(function (i) { return iso(D.runs[i]); }).join(', ')",
    )
    cut = _js(N_(", cut by the budget"))
    texts = {
        "every_run": _js(N_("every run")),
        "every_setting": _js(N_("every setting")),
        "every_group": _js(N_("every group")),
        "item": _js(N_("item")),
        "setting": _js(N_("setting")),
        "group": _js(N_("group")),
        "gold": _js(N_("gold")),
        "count": _js(N_("{shown} of {total} items shown"), shown="Math.min(shown, rows.length)", total="rows.length"),
        "heading": _js(
            N_("{item} ({setting})  gold: {gold}"), item="iso(r[0])", setting="iso(D.settings[r[1]])", gold="iso(r[3])"
        ),
        "prompt_title": _js(N_("{title} ({n} characters)"), title="title", n="text.length"),
        "prompt": _js(N_("prompt")),
        # a qualifier of the heading "prompt" (a language that sets it without a space drops the space)
        "in_full": _js(N_(" (in full)")),
        # The English script broke this line here: kept, so that the English page is byte for byte as before.
        "focused": focused.replace("focus), given to ", "focus), ' +\n               'given to ", 1),
        "correct": _js(N_("correct")),
        "incorrect": _js(N_("incorrect")),
        # {cut}: the clause ", cut by the budget" where the budget cut the thinking, else nothing
        "thinking": _js(N_("thinking ({n} tokens{cut})"), n="a[6][1]", cut=f"(a[6][2] ? {cut} : '')"),
        "raw_output": _js(N_("raw output")),
        "parsed": _js(N_("parsed")),
        "focused_note": _js(N_("focused: the full prompt did not fit, this run got the shorter one")),
    }
    return re.sub(r"@(\w+)@", lambda m: texts[m.group(1)], _JS)


# The script; each @name@ is a text of _script()'s, a JS expression in the page's language.
_JS = """
(function () {
  var el = document.getElementById('items-data');
  var D = el ? JSON.parse(el.textContent) : window.OFFLINE_EVAL_ITEMS;
  if (!D) { return; }
  var $ = function (id) { return document.getElementById(id); };
  var PAGE = 200, shown = PAGE;
  var opt = function (sel, values, all) {
    sel.innerHTML = '';
    if (all) { sel.add(new Option(all, '')); }
    values.forEach(function (v, i) { sel.add(new Option(v, String(i))); });
  };
  var groups = [];
  D.rows.forEach(function (r) { if (r[2] != null && groups.indexOf(r[2]) < 0) { groups.push(r[2]); } });
  groups.sort();
  opt($('f-run'), D.runs, @every_run@);
  opt($('f-setting'), D.settings, @every_setting@);
  opt($('f-group'), groups, @every_group@);
  var mark = function (a) { return a ? (a[2] === 1 ? '\\u2713 ' : a[2] === 0 ? '\\u2717 ' : '') + a[1] : ''; };
  var visibleRuns = function () {
    var v = $('f-run').value;
    return v === '' ? D.runs.map(function (_, i) { return i; }) : [parseInt(v, 10)];
  };
  var keep = function (r) {
    var s = $('f-setting').value, g = $('f-group').value, a = $('f-answer').value;
    if (s !== '' && r[1] !== parseInt(s, 10)) { return false; }
    if (g !== '' && r[2] !== groups[parseInt(g, 10)]) { return false; }
    var answers = visibleRuns().map(function (i) { return r[4][i]; }).filter(Boolean);
    if (!answers.length) { return false; }
    if (a === 'correct') { return answers.some(function (x) { return x[2] === 1; }); }
    if (a === 'incorrect') { return answers.some(function (x) { return x[2] === 0; }); }
    if (a === 'differ') {
      return answers.some(function (x) { return x[1] !== answers[0][1]; });
    }
    return true;
  };
  var cell = function (tr, text) { var td = tr.insertCell(); td.textContent = text; return td; };
  var render = function () {
    var runs = visibleRuns(), rows = D.rows.filter(keep);
    var head = document.querySelector('#items thead');
    head.innerHTML = '';
    var hr = head.insertRow();
    [@item@, @setting@, @group@, @gold@].forEach(function (h) {
      var th = document.createElement('th'); th.textContent = h; hr.appendChild(th);
    });
    runs.forEach(function (i) {
      var th = document.createElement('th'); th.textContent = D.runs[i]; th.title = (D.weights || [])[i] || '';
      hr.appendChild(th);
    });
    var body = document.querySelector('#items tbody');
    body.innerHTML = '';
    rows.slice(0, shown).forEach(function (r) {
      var tr = body.insertRow();
      [r[0], D.settings[r[1]], r[2] == null ? '' : r[2], r[3]].forEach(function (t) { cell(tr, t); });
      runs.forEach(function (i) { cell(tr, mark(r[4][i])); });
      tr.addEventListener('click', function () { detail(r); });
    });
    $('f-count').textContent = @count@;
    $('more').style.display = rows.length > shown ? '' : 'none';
  };
  // Data in a line of other text, isolated (FSI ... PDI): a right-to-left override in it ends where it does.
  var iso = function (s) { return '\u2068' + s + '\u2069'; };
  var detail = function (r) {
    var box = $('item-detail');
    box.innerHTML = '';
    var h = document.createElement('h3');
    h.textContent = @heading@;
    box.appendChild(h);
    var prompt = function (p, title) {
      var d = document.createElement('details'), s = document.createElement('summary');
      var text = p.map(function (m) {
        return '[' + m[0] + ']\\n' + m.slice(1).map(function (i) { return D.texts[i]; }).join('\\n');
      }).join('\\n\\n');
      d.className = 'prompt';
      s.textContent = @prompt_title@;
      var pre = document.createElement('pre'); pre.textContent = text; pre.style.whiteSpace = 'pre-wrap';
      d.appendChild(s); d.appendChild(pre); box.appendChild(d);
    };
    var runs = visibleRuns().filter(function (i) { return r[4][i]; });
    if (r[5]) {
      var focused = runs.filter(function (i) { return r[4][i][4] === 1; });
      prompt(r[5][0], @prompt@ + (focused.length ? @in_full@ : ''));
      if (r[5][1] && focused.length) {
        prompt(r[5][1], @focused@);
      }
    }
    var t = document.createElement('table'), tr = t.insertRow();
    visibleRuns().forEach(function (i) {
      var a = r[4][i];
      if (!a) { return; }
      var td = tr.insertCell(), add = function (label, text) {
        var b = document.createElement('b'); b.textContent = label; td.appendChild(b);
        var p = document.createElement('pre'); p.textContent = text; p.style.whiteSpace = 'pre-wrap';
        td.appendChild(p);
      };
      td.style.verticalAlign = 'top';
      add(iso(D.runs[i]) + ((D.weights || [])[i] ? ' (' + iso(D.weights[i]) + ')' : ''),
          a[2] === 1 ? @correct@ : a[2] === 0 ? @incorrect@ : '');
      if (a[6]) {
        var th = document.createElement('details'), sm = document.createElement('summary');
        sm.textContent = @thinking@;
        var tp = document.createElement('pre'); tp.textContent = a[6][0]; tp.style.whiteSpace = 'pre-wrap';
        th.appendChild(sm); th.appendChild(tp); td.appendChild(th);
      }
      add(@raw_output@, a[0]);
      add(@parsed@, a[1]);
      add(@gold@, r[3]);
      if (a[4] === 1) { add(@prompt@, @focused_note@); }
      Object.keys(a[3]).forEach(function (k) { add(k, a[3][k]); });
      Object.keys(a[5] || {}).forEach(function (k) {
        var b = document.createElement('b'); b.textContent = k; td.appendChild(b);
        var p = document.createElement('pre'); p.className = 'diff'; p.style.whiteSpace = 'pre-wrap';
        a[5][k].forEach(function (seg) {
          var e = document.createElement(seg[0] === '+' ? 'ins' : seg[0] === '-' ? 'del' : 'span');
          e.textContent = seg[0] === '\\u2026' ? ' \\u2026' + seg[1] + '\\u2026 ' : seg[1];
          if (seg[0] === '\\u2026') { e.className = 'elided'; }
          p.appendChild(e);
        });
        td.appendChild(p);
      });
    });
    box.appendChild(t);
  };
  ['f-run', 'f-setting', 'f-group', 'f-answer'].forEach(function (id) {
    $(id).addEventListener('change', function () { shown = PAGE; render(); });
  });
  $('more').addEventListener('click', function () { shown += PAGE; render(); });
  render();
})();
"""
