(function () {
  "use strict";
  // Every text from a model or a data file goes through textContent: none of it is parsed as markup or script.
  var data = JSON.parse(document.getElementById("payload").textContent);
  var KEY = "offline-eval-annotate:" + data.sample;
  var cases = data.cases;
  // The runs and the judges' scores, by case id: inline only under --unblind, else loaded from the reveal file.
  var reveal = data.reveal;
  var state = restore();
  var at = Math.max(0, Math.min(cases.length - 1, state.at || 0));

  // The page's words in its language, by key (page.py translates them): t() fills in their {fields}.
  function t(key, fields) {
    return String(data.text[key]).replace(/\{(\w+)\}/g, function (m, k) {
      return fields && Object.prototype.hasOwnProperty.call(fields, k) ? String(fields[k]) : m;
    });
  }

  function restore() {
    var s = null;
    try {
      s = JSON.parse(window.localStorage.getItem(KEY) || "null");
    } catch (e) {
      s = null;
    }
    if (!s || s.sample !== data.sample || typeof s.cases !== "object") {
      s = { sample: data.sample, annotator: data.annotator || "", cases: {}, at: 0 };
    }
    Object.keys(data.prefill || {}).forEach(function (k) {
      var p = data.prefill[k];
      if (!s.cases[k]) {
        s.cases[k] = { scores: p.scores || {}, comments: p.comments || {}, saved: true, skipped: false };
      }
      if (!s.annotator && p.annotator) {
        s.annotator = p.annotator;
      }
    });
    return s;
  }

  function keep() {
    state.at = at;
    try {
      window.localStorage.setItem(KEY, JSON.stringify(state));
    } catch (e) {
      say(t("storage", { error: e.name }));
    }
  }

  function entry(c) {
    if (!state.cases[c.case]) {
      state.cases[c.case] = { scores: {}, comments: {}, saved: false, skipped: false };
    }
    return state.cases[c.case];
  }

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) {
      e.className = cls;
    }
    if (text !== undefined && text !== null) {
      e.textContent = String(text);
    }
    return e;
  }

  function say(text) {
    document.getElementById("message").textContent = text;
  }

  function doc(d) {
    var body;
    if (d.diff) {
      body = el("pre", "diff");
      d.diff.forEach(function (seg) {
        var cls = { "+": "ins", "-": "del", "…": "gap" }[seg[0]] || "same";
        body.appendChild(el("span", cls, seg[1]));
      });
    } else {
      body = el("pre", "text", d.text);
    }
    if (d.open) {
      var s = el("section", "doc");
      s.appendChild(el("h3", "", d.title));
      s.appendChild(body);
      return s;
    }
    var det = el("details", "doc");
    det.appendChild(el("summary", "", d.title));
    det.appendChild(body);
    return det;
  }

  function counts() {
    var done = 0, skipped = 0;
    cases.forEach(function (c) {
      var e = state.cases[c.case];
      if (e && e.saved) {
        done += 1;
      } else if (e && e.skipped) {
        skipped += 1;
      }
    });
    return { done: done, skipped: skipped, left: cases.length - done - skipped };
  }

  function progress() {
    var n = counts();
    document.getElementById("progress").textContent =
      t("progress", { done: n.done, skipped: n.skipped, left: n.left, total: cases.length });
    var pick = document.getElementById("pick");
    pick.textContent = "";
    cases.forEach(function (c, i) {
      var e = state.cases[c.case];
      var mark = e && e.saved ? "✓ " : e && e.skipped ? "– " : "  ";
      var o = el("option", "", mark + (i + 1) + ". " + c.stratum + " / " + c.item_id);
      o.value = String(i);
      pick.appendChild(o);
    });
    pick.value = String(at);
  }

  function scale(c, s, e) {
    var f = el("fieldset", "scale");
    f.appendChild(el("legend", "", s.name + " (" + s.code + ")"));
    f.appendChild(el("p", "definition", s.definition));
    var levels = el("ul", "levels");
    s.levels.forEach(function (lv) {
      levels.appendChild(el("li", "", lv[0] + ": " + lv[1]));
    });
    f.appendChild(levels);
    var name = "score-" + s.code;
    var row = el("div", "choices");
    if (s.hi - s.lo <= 10) {
      for (var v = s.lo; v <= s.hi; v += 1) {
        var lab = el("label", "choice");
        var r = el("input");
        r.type = "radio";
        r.name = name;
        r.value = String(v);
        r.checked = e.scores[s.code] !== undefined && Number(e.scores[s.code]) === v;
        r.addEventListener("change", pickScore(c, s.code));
        lab.appendChild(r);
        lab.appendChild(document.createTextNode(" " + v));
        row.appendChild(lab);
      }
    } else {
      var num = el("input", "number");
      num.type = "number";
      num.min = String(s.lo);
      num.max = String(s.hi);
      num.step = "1";
      num.name = name;
      if (e.scores[s.code] !== undefined) {
        num.value = String(e.scores[s.code]);
      }
      num.addEventListener("input", pickScore(c, s.code));
      row.appendChild(num);
      row.appendChild(el("span", "range", s.lo + "–" + s.hi));
    }
    f.appendChild(row);
    var com = el("textarea", "comment");
    com.name = "comment-" + s.code;
    com.placeholder = t("comment");
    com.value = e.comments[s.code] || "";
    com.addEventListener("input", function () {
      entry(c).comments[s.code] = com.value;
      keep();
    });
    f.appendChild(com);
    return f;
  }

  function pickScore(c, code) {
    return function (ev) {
      entry(c).scores[code] = ev.target.value;
      keep();
    };
  }

  function valid(c, e) {
    for (var i = 0; i < c.scales.length; i += 1) {
      var s = c.scales[i];
      var raw = e.scores[s.code];
      var v = Number(raw);
      if (raw === undefined || raw === "" || !Number.isInteger(v) || v < s.lo || v > s.hi) {
        return t("invalid", { name: s.name, code: s.code, lo: s.lo, hi: s.hi });
      }
    }
    return "";
  }

  function show() {
    var c = cases[at];
    var e = entry(c);
    var box = document.getElementById("case");
    box.textContent = "";
    var heading = t("heading", { at: at + 1, total: cases.length, stratum: c.stratum, item: c.item_id });
    box.appendChild(el("h2", "", heading));
    if (c.prompt.length) {
      var p = el("details", "prompt");
      p.appendChild(el("summary", "", t("prompt")));
      c.prompt.forEach(function (m) {
        p.appendChild(el("h4", "", m[0]));
        p.appendChild(el("pre", "text", m[1]));
      });
      box.appendChild(p);
    }
    c.shown.forEach(function (d) {
      box.appendChild(doc(d));
    });
    if (c.gold.length) {
      var g = el("details", "gold");
      g.appendChild(el("summary", "", t("gold")));
      c.gold.forEach(function (d) {
        g.appendChild(doc(d));
      });
      box.appendChild(g);
    }
    var form = el("div", "scales");
    c.scales.forEach(function (s) {
      form.appendChild(scale(c, s, e));
    });
    box.appendChild(form);
    var buttons = el("div", "buttons");
    var save = el("button", "save", t(e.saved ? "save_again" : "save"));
    save.type = "button";
    save.addEventListener("click", function () {
      var why = valid(c, entry(c));
      if (why) {
        say(why);
        return;
      }
      var x = entry(c);
      x.saved = true;
      x.skipped = false;
      keep();
      say(t("saved"));
      show();
    });
    var skip = el("button", "skip", t("skip"));
    skip.type = "button";
    skip.addEventListener("click", function () {
      var x = entry(c);
      if (!x.saved) {
        x.skipped = true;
      }
      keep();
      move(1);
    });
    buttons.appendChild(save);
    buttons.appendChild(skip);
    box.appendChild(buttons);
    var hidden = reveal && Object.prototype.hasOwnProperty.call(reveal.cases, c.case) && reveal.cases[c.case];
    if ((e.saved || !data.blind) && hidden && Array.isArray(hidden.hidden)) {
      var h = el("section", "revealed");
      h.appendChild(el("h3", "", t(data.blind ? "revealed" : "unblind")));
      hidden.hidden.forEach(function (d) {
        h.appendChild(doc(d));
      });
      box.appendChild(h);
    } else if (e.saved) {
      box.appendChild(el("p", "unrevealed", t("unrevealed", { file: data.reveal_file })));
    }
    progress();
  }

  function move(step) {
    at = Math.max(0, Math.min(cases.length - 1, at + step));
    keep();
    say("");
    show();
  }

  function csvCell(v) {
    var s = v === undefined || v === null ? "" : String(v);
    // A cell a spreadsheet would evaluate (OWASP's CSV injection rule: =, +, -, @, tab, CR first) gets a leading
    // quote, as does one that already starts with quotes before such a character, so the reader strips exactly one.
    if (/^'*[=+\-@\t\r]/.test(s)) {
      s = "'" + s;
    }
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }

  function exportRows() {
    var rows = [];
    cases.forEach(function (c) {
      var e = state.cases[c.case];
      if (!e || !e.saved || valid(c, e)) {
        return;
      }
      var common = {
        "case": c.case, annotator: state.annotator, sample: data.sample, output_sha256: c.output_sha256, draw: data.draw
      };
      if (data.form.kind === "csv") {
        c.scales.forEach(function (s) {
          var r = Object.assign({}, c.export, common, { criterion: s.code, score: Number(e.scores[s.code]) });
          r[data.form.comment_field] = e.comments[s.code] || "";
          rows.push(r);
        });
      } else {
        var s0 = c.scales[0];
        var r = Object.assign({}, c.export, common, { score: Number(e.scores[s0.code]) });
        r[data.form.comment_field] = e.comments[s0.code] || "";
        rows.push(r);
      }
    });
    return rows;
  }

  function download() {
    if (!state.annotator.trim()) {
      say(t("no_annotator"));
      return;
    }
    var rows = exportRows();
    if (!rows.length) {
      say(t("nothing"));
      return;
    }
    var text;
    if (data.form.kind === "csv") {
      var cols = data.form.columns;
      // With a byte order mark: Japanese Excel reads a CSV without one as cp932.
      text = "\ufeff" + cols.join(",") + "\n" + rows.map(function (r) {
        return cols.map(function (k) { return csvCell(r[k]); }).join(",");
      }).join("\n") + "\n";
    } else {
      text = rows.map(function (r) { return JSON.stringify(r); }).join("\n") + "\n";
    }
    var blob = new Blob([text], { type: data.form.kind === "csv" ? "text/csv;charset=utf-8" : "application/jsonl" });
    var a = el("a");
    var tag = state.annotator.trim().replace(/[\\/:*?"<>|\u0000-\u001f\s]+/g, "_");
    var name = data.form.file_name.replace(/(\.[a-z]+)$/, "-" + data.sample + "-" + tag + "$1");
    a.href = URL.createObjectURL(blob);
    a.download = name;
    document.body.appendChild(a);
    a.click();
    setTimeout(function () {
      URL.revokeObjectURL(a.href);
      a.remove();
    }, 1000);
    say(t("exported", { rows: rows.length, file: name }));
  }

  var who = document.getElementById("annotator");
  who.value = state.annotator;
  who.addEventListener("input", function () {
    state.annotator = who.value;
    keep();
  });
  document.getElementById("export").addEventListener("click", download);
  var loader = document.getElementById("reveal");
  if (loader) {
    loader.addEventListener("change", function () {
      var f = loader.files && loader.files[0];
      if (!f) {
        return;
      }
      var rd = new FileReader();
      rd.onload = function () {
        var r = null;
        try {
          r = JSON.parse(String(rd.result));
        } catch (err) {
          r = null;
        }
        if (!r || typeof r.cases !== "object" || r.cases === null) {
          say(t("not_reveal", { file: f.name, reveal_file: data.reveal_file }));
        } else if (r.sample !== data.sample) {
          say(t("other_sample", { file: f.name, sample: r.sample, page_sample: data.sample }));
        } else {
          reveal = r;
          say(t("loaded", { file: f.name }));
          show();
        }
      };
      rd.readAsText(f);
    });
  }
  document.getElementById("prev").addEventListener("click", function () { move(-1); });
  document.getElementById("next").addEventListener("click", function () { move(1); });
  document.getElementById("pick").addEventListener("change", function (ev) {
    at = Number(ev.target.value);
    keep();
    say("");
    show();
  });
  show();
})();
