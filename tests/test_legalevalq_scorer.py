"""LegalEval-Q's scorer is the authors' architecture: a checkpoint in their released layout
(`best_regression_bert_tri_inputs.pth`) loads with strict key matching and scores as an independent forward pass
of that layout, written here from the state dict alone (BERT included), does."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")  # the scorer needs the `hf` extra; the fast tier has none
F = torch.nn.functional
pytestmark = pytest.mark.engine

from conftest import ROOT, run_cli

from offline_eval.runtime.errors import InputError
from offline_eval.tasks.legalevalq.model import HierarchicalExtractor, layer_groups
from offline_eval.tasks.legalevalq.scorer import Scorer, ScorerConfig

HIDDEN, HEADS = 32, 2
ROWS = [
    {
        "query": "賃貸借契約の解除はできますか。",
        "answer": "民法第541条によれば、催告の後に解除できる。",
        "comment": "内容の質：十分。構成と整理：明確。",
        "conclusion": "妥当",
        "score": 70.0,
    },
    {
        "query": "未成年者の契約は取り消せますか。",
        "answer": "できない。",
        "comment": "根拠条文の引用がない。",
        "conclusion": "不十分",
        "score": 20.0,
    },
    {
        "query": "時効の援用とは何ですか。",
        "answer": "時効の利益を受ける意思表示である。" * 40,  # over 512 tokens
        "comment": "表現は適切。" * 100,
        "conclusion": "良好",
        "score": 85.0,
    },
    {
        "query": "正当防衛の要件は？",
        "answer": "急迫不正の侵害に対し、自己又は他人の権利を防衛するため。",
        "comment": "構成は明確だが、やむを得ずにした行為であることの説明がない。",
        "conclusion": "概ね妥当",
        "score": 60.0,
    },
    {"query": "契約とは", "answer": "", "comment": "回答がない。", "conclusion": "使用不能", "score": 0.0},
]


@pytest.fixture(scope="module")
def bert12(tmp_path_factory) -> Path:
    """A tiny 12-layer BERT (the authors' depth) whose vocabulary comes from this file's rows."""
    d = tmp_path_factory.mktemp("bert12")
    texts = [{"t": f"<query>:{r['query']}</query>\n\n<content>:{r['answer']}</content>"} for r in ROWS]
    (d / "corpus.jsonl").write_text(
        "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in ROWS + texts), encoding="utf-8"
    )
    subprocess.run(
        [
            sys.executable,
            str(ROOT / "scripts" / "make_tiny_bert.py"),
            str(d / "bert"),
            "--data",
            str(d),
            "--layers",
            "12",
            "--hidden",
            str(HIDDEN),
        ],
        check=True,
        capture_output=True,
    )
    return d / "bert"


def _authors_state(bert: Path, seed: int = 7) -> dict[str, torch.Tensor]:
    """Random weights under the authors' key names and shapes, written out by hand (not from our model)."""
    from transformers import BertConfig, BertModel

    g = torch.Generator().manual_seed(seed)
    cfg = BertConfig.from_pretrained(str(bert))
    h = cfg.hidden_size
    state: dict[str, torch.Tensor] = {}
    for k, name in enumerate(("bert_reasoning", "bert_ans", "bert_content")):
        torch.manual_seed(seed + k)
        for key, v in BertModel(cfg).state_dict().items():  # the authors' encoders are transformers BertModels
            state[f"{name}.{key}"] = v + 0.05 * torch.randn(v.shape, generator=g) if v.is_floating_point() else v

    def linear(prefix: str, n_in: int, n_out: int, gain: float = 1.0) -> None:
        state[prefix + ".weight"] = gain * torch.randn(n_out, n_in, generator=g) / math.sqrt(n_in)
        state[prefix + ".bias"] = 0.1 * torch.randn(n_out, generator=g)

    def norm(prefix: str, n: int) -> None:
        state[prefix + ".weight"] = 1 + 0.2 * torch.randn(n, generator=g)
        state[prefix + ".bias"] = 0.2 * torch.randn(n, generator=g)

    for group in ("low", "mid", "high"):
        state[f"extractor.weights_{group}"] = torch.randn(4, generator=g)
    linear("extractor.gate.0", h, h)
    linear("fusion.gate.0", 3 * h, 2 * h)
    linear("fusion.projection.0", 3 * h, h)
    norm("fusion.projection.1", h)
    for i, (n_in, n_out) in ((0, (h, 512)), (4, (512, 256))):
        linear(f"regressor.{i}", n_in, n_out)
        norm(f"regressor.{i + 1}", n_out)
        block = f"regressor.{i + 3}.linear"
        linear(f"{block}.0", n_out, n_out)
        norm(f"{block}.1", n_out)
        linear(f"{block}.4", n_out, n_out)
        norm(f"{block}.5", n_out)
    linear("regressor.8", 256, 1, gain=10.0)  # spreads the scores: the rows' features differ little
    return state


# ---- the oracle: the authors' forward pass in eval mode, from the state dict and torch functions only ----


def _lin(sd: dict, p: str, x: torch.Tensor) -> torch.Tensor:
    return x @ sd[p + ".weight"].T + sd[p + ".bias"]


def _ln(sd: dict, p: str, x: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return F.layer_norm(x, x.shape[-1:], sd[p + ".weight"], sd[p + ".bias"], eps)


def _bert_hidden_states(sd: dict, enc: str, tok: dict) -> list[torch.Tensor]:
    ids, types, mask = tok["input_ids"], tok["token_type_ids"], tok["attention_mask"]
    n = ids.shape[1]
    e = f"{enc}.embeddings"
    x = (
        sd[f"{e}.word_embeddings.weight"][ids]
        + sd[f"{e}.position_embeddings.weight"][:n]
        + sd[f"{e}.token_type_embeddings.weight"][types]
    )
    x = _ln(sd, f"{e}.LayerNorm", x, 1e-12)
    states, masked = [x], (1.0 - mask[:, None, None, :].float()) * -1e9
    for i in range(12):
        p = f"{enc}.encoder.layer.{i}"
        b, d = x.shape[0], HIDDEN // HEADS
        q, k, v = (
            _lin(sd, f"{p}.attention.self.{w}", x).view(b, n, HEADS, d).transpose(1, 2)
            for w in ("query", "key", "value")
        )
        att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(d) + masked, dim=-1) @ v
        att = att.transpose(1, 2).reshape(b, n, HIDDEN)
        x = _ln(sd, f"{p}.attention.output.LayerNorm", _lin(sd, f"{p}.attention.output.dense", att) + x, 1e-12)
        inner = F.gelu(_lin(sd, f"{p}.intermediate.dense", x))
        x = _ln(sd, f"{p}.output.LayerNorm", _lin(sd, f"{p}.output.dense", inner) + x, 1e-12)
        states.append(x)
    return states


def _extract(sd: dict, states: list[torch.Tensor]) -> torch.Tensor:
    groups = []
    for name, layers in (("low", states[1:5]), ("mid", states[5:9]), ("high", states[9:13])):
        w = torch.softmax(sd[f"extractor.weights_{name}"], dim=0)
        groups.append(sum(w[j] * layers[j][:, 0] for j in range(4)))
    g = torch.softmax(_lin(sd, "extractor.gate.0", (groups[0] + groups[1] + groups[2]) / 3), dim=-1)
    return g * groups[0] + g * groups[1] + g * groups[2]


def _residual(sd: dict, p: str, x: torch.Tensor) -> torch.Tensor:
    y = F.gelu(_ln(sd, f"{p}.linear.1", _lin(sd, f"{p}.linear.0", x)))
    return x + _ln(sd, f"{p}.linear.5", _lin(sd, f"{p}.linear.4", y))


def oracle(sd: dict, bert: Path, rows: list[dict]) -> list[float]:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(bert))

    def enc(texts: list[str]) -> dict:
        return tok(texts, max_length=512, truncation=True, padding="max_length", return_tensors="pt")

    with torch.no_grad():
        r = _extract(sd, _bert_hidden_states(sd, "bert_reasoning", enc([x["comment"] for x in rows])))
        a = _extract(sd, _bert_hidden_states(sd, "bert_ans", enc([x["conclusion"] for x in rows])))
        c = _extract(
            sd,
            _bert_hidden_states(
                sd,
                "bert_content",
                enc([f"<query>:{x['query']}</query>\n\n<content>:{x['answer']}</content>" for x in rows]),
            ),
        )
        cat = torch.cat([r, a, c], dim=-1)
        gates = torch.sigmoid(_lin(sd, "fusion.gate.0", cat))
        fused = (
            gates[:, :HIDDEN] * _ln(sd, "fusion.projection.1", _lin(sd, "fusion.projection.0", cat))
            + gates[:, HIDDEN:] * r
        )
        x = _residual(sd, "regressor.3", F.gelu(_ln(sd, "regressor.1", _lin(sd, "regressor.0", fused))))
        x = _residual(sd, "regressor.7", F.gelu(_ln(sd, "regressor.5", _lin(sd, "regressor.4", x))))
        return (torch.sigmoid(_lin(sd, "regressor.8", x))[:, 0] * 100).tolist()


def _write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_authors_checkpoint_scores_as_their_forward_pass(bert12, tmp_path):
    sd = _authors_state(bert12)
    torch.save({"state_dict": sd}, tmp_path / "best_regression_bert_tri_inputs.pth")
    p = run_cli(
        "legaleval-q",
        "predict",
        "--data",
        str(_write_rows(tmp_path / "rows.jsonl", ROWS)),
        "--from-pth",
        str(tmp_path / "best_regression_bert_tri_inputs.pth"),
        "--encoder",
        str(bert12),
        "--out",
        str(tmp_path / "pred.jsonl"),
    )
    assert p.returncode == 0, p.stderr[-2000:]
    ours = [json.loads(x)["predicted"] for x in (tmp_path / "pred.jsonl").read_text().splitlines()]
    theirs = oracle(sd, bert12, ROWS)
    worst = max(abs(o - t) for o, t in zip(ours, theirs))
    print(f"max abs difference vs the independent forward pass: {worst:.6f} points ({ours} vs {theirs})")
    assert worst <= 0.01, (ours, theirs)
    assert max(theirs) - min(theirs) > 1.0, theirs  # the rows score differently: agreement is not a constant
    # The oracle can tell a wrong wiring apart: comment and conclusion swapped gives other scores.
    swapped = oracle(sd, bert12, [{**r, "comment": r["conclusion"], "conclusion": r["comment"]} for r in ROWS])
    assert max(abs(o - s) for o, s in zip(ours, swapped)) > 0.5


def test_dataparallel_prefix_and_old_position_ids_still_load_strictly(bert12, tmp_path):
    sd = _authors_state(bert12, seed=3)
    old = {"module." + k: v for k, v in sd.items()}
    for name in ("bert_reasoning", "bert_ans", "bert_content"):
        old[f"module.{name}.embeddings.position_ids"] = torch.arange(512)[None]  # transformers < 4.31 saved it
    torch.save({"state_dict": old, "epoch": 4}, tmp_path / "old.pth")
    s = Scorer.from_author_checkpoint(tmp_path / "old.pth", str(bert12))
    assert all(torch.equal(v, sd[k]) for k, v in s.model.state_dict().items())
    assert not s.model.training and s.config.max_length == 512


def test_padding_to_the_longest_text_scores_as_padding_to_max_length(bert12, tmp_path):
    """Training pads to the batch's longest text (less work); the authors pad to max_length."""
    torch.save({"state_dict": _authors_state(bert12)}, tmp_path / "a.pth")
    s = Scorer.from_author_checkpoint(tmp_path / "a.pth", str(bert12))
    rows = [r for r in ROWS if len(r["comment"]) < 100 and len(r["answer"]) < 100]
    short = s.batch(rows, pad_to_max_length=False)
    assert short["reasoning"]["input_ids"].shape[1] < 512 == s.batch(rows)["reasoning"]["input_ids"].shape[1]
    with torch.no_grad():
        diff = (s.model(**short) - s.model(**s.batch(rows))).abs().max().item() * 100
    assert diff < 0.01, diff


def test_an_output_scores_the_same_whatever_shares_its_batch(bert12, tmp_path):
    """A score is the output's own: scored alone, first or last among others, beside long or short rows, with
    one thread or several, it is the same number (==, not close). Batched forward passes pick kernels by the
    number of rows, and a sweep re-run read 57.8356 for an output its first run scored 57.8355."""
    torch.save({"state_dict": _authors_state(bert12)}, tmp_path / "a.pth")
    s = Scorer.from_author_checkpoint(tmp_path / "a.pth", str(bert12))
    others = [{**r, "comment": r["comment"] + f"（{k}）"} for k in range(2) for r in ROWS]
    batches = [ROWS[::-1], [ROWS[2]] + others + ROWS, others[:3] + ROWS[:1] + others[3:] + ROWS[1:]]
    key = [json.dumps(r, ensure_ascii=False) for r in ROWS]
    alone = [s.scores([r])[0] for r in ROWS]  # unrounded: batched, they were 1e-5 to 2e-4 points away
    assert len(set(alone)) == len(ROWS), alone  # the rows score apart: agreement is not a constant
    for b in batches:
        got = dict(zip((json.dumps(r, ensure_ascii=False) for r in b), s.scores(b)))
        assert [got[k] for k in key] == alone, b
    assert s.predict(others + ROWS)[-len(ROWS) :] == [round(x, 4) for x in alone]
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        assert s.scores(ROWS[::-1])[::-1] == alone
    finally:
        torch.set_num_threads(threads)


def test_incompatible_checkpoint_is_one_line_naming_the_keys(bert12, tmp_path):
    rows = _write_rows(tmp_path / "rows.jsonl", ROWS[:1])
    sd = _authors_state(bert12)
    sd["fusion.proj.0.weight"] = sd.pop("fusion.projection.0.weight")
    del sd["extractor.weights_mid"]
    torch.save({"state_dict": sd}, tmp_path / "renamed.pth")
    p = run_cli(
        "legaleval-q",
        "predict",
        "--data",
        str(rows),
        "--from-pth",
        str(tmp_path / "renamed.pth"),
        "--encoder",
        str(bert12),
    )
    assert p.returncode == 2 and "Traceback" not in p.stderr and "RuntimeError" not in p.stderr, p.stderr
    line = p.stderr.strip().splitlines()[-1]  # earlier lines, if any, are library warnings on import
    assert line.startswith("offline-eval: error: ") and str(tmp_path / "renamed.pth") in line, p.stderr
    assert sum("renamed.pth" in x for x in p.stderr.splitlines()) == 1, p.stderr
    assert "2 missing (extractor.weights_mid, fusion.projection.0.weight)" in line, line
    assert "1 unexpected (fusion.proj.0.weight)" in line, line

    # Another encoder's width: the shapes differ (load_state_dict would raise a RuntimeError even unstrict).
    sd = _authors_state(bert12)
    sd["extractor.weights_low"] = torch.zeros(3)
    torch.save({"state_dict": sd}, tmp_path / "shape.pth")
    with pytest.raises(
        InputError,
        match=r"1 of another shape \(extractor.weights_low \(3,\) in the file, "
        r"\(4,\) here\)",
    ):
        Scorer.from_author_checkpoint(tmp_path / "shape.pth", str(bert12))
    torch.save([1, 2], tmp_path / "list.pth")
    (tmp_path / "junk.pth").write_bytes(b"not a checkpoint")
    for bad, needle in (
        ("list.pth", "expected a dict with 'state_dict'"),
        ("junk.pth", "not a torch checkpoint"),
        ("absent.pth", "no such checkpoint file"),
    ):
        p = run_cli(
            "legaleval-q", "predict", "--data", str(rows), "--from-pth", str(tmp_path / bad), "--encoder", str(bert12)
        )
        assert p.returncode == 2 and "Traceback" not in p.stderr and needle in p.stderr, p.stderr


def test_a_model_we_train_has_the_authors_layout(bert12, tmp_path):
    ours = Scorer(ScorerConfig(encoder=str(bert12))).model.state_dict()
    theirs = _authors_state(bert12)
    assert {k: tuple(v.shape) for k, v in ours.items()} == {k: tuple(v.shape) for k, v in theirs.items()}


@pytest.mark.parametrize(
    "n, sizes",
    [(12, [4, 4, 4]), (6, [2, 2, 2]), (7, [3, 2, 2]), (8, [3, 3, 2]), (13, [5, 4, 4]), (24, [8, 8, 8]), (3, [1, 1, 1])],
)
def test_layer_groups_for_other_depths(n, sizes):
    assert layer_groups(n) == sizes
    ex = HierarchicalExtractor(4, n)
    assert [ex.weights_low.numel(), ex.weights_mid.numel(), ex.weights_high.numel()] == sizes


def test_extractor_groups_contiguous_layers_with_their_own_weights():
    """7 layers: hidden_states[1:4], [4:6], [6:8]. With one-hot group weights and a constant gate the output
    is the sum of the chosen layers' CLS vectors, each scaled by 1/h."""
    torch.manual_seed(0)
    h = 4
    ex = HierarchicalExtractor(h, 7)
    states = tuple(torch.randn(2, 3, h) for _ in range(8))
    with torch.no_grad():
        ex.weights_low.copy_(torch.tensor([0.0, 50.0, 0.0]))  # -> layer 2
        ex.weights_mid.copy_(torch.tensor([50.0, 0.0]))  # -> layer 4
        ex.weights_high.copy_(torch.tensor([0.0, 50.0]))  # -> layer 7
        ex.gate[0].weight.zero_()
        ex.gate[0].bias.zero_()
        out = ex(states)
    want = (states[2][:, 0] + states[4][:, 0] + states[7][:, 0]) / h
    assert torch.allclose(out, want, atol=1e-5)
    with pytest.raises(ValueError, match="at least 3"):
        layer_groups(2)
    with pytest.raises(ValueError, match="returned 12 hidden layers"):
        ex(tuple(torch.randn(2, 3, h) for _ in range(13)))


def test_a_scorer_from_the_older_format_is_a_clear_error(bert12, tmp_path):
    d = tmp_path / "old-scorer"
    d.mkdir()
    (d / "scorer_config.json").write_text(json.dumps({"encoder": str(bert12), "max_length": 256, "dropout": 0.1}))
    (d / "scorer.safetensors").write_bytes(b"")
    rows = _write_rows(tmp_path / "rows.jsonl", ROWS[:1])
    p = run_cli("legaleval-q", "predict", "--data", str(rows), "--scorer", str(d))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert "field 'format': written in scorer format 1" in p.stderr and "legaleval-q train" in p.stderr, p.stderr
    (d / "scorer_config.json").write_text(json.dumps({"encoder": str(bert12), "max_length": 64, "format": 2}))
    with pytest.raises(InputError, match="scorer.safetensors: not a readable safetensors file"):
        Scorer.load(d)


def test_a_scorer_folder_finds_its_encoder_from_any_working_directory(bert12, tmp_path, monkeypatch):
    """The encoder path is written relative to the scorer folder, so a sweep run from elsewhere still loads it
    (older folders, written relative to the training directory, still load from there)."""
    work = tmp_path / "project"
    work.mkdir()
    (work / "bert").symlink_to(bert12, target_is_directory=True)
    monkeypatch.chdir(work)
    Scorer(ScorerConfig(encoder="bert", max_length=64)).save("scorers/s1")
    written = json.loads((work / "scorers/s1/scorer_config.json").read_text())["encoder"]
    assert written == "../../bert"
    monkeypatch.chdir(tmp_path)
    assert Scorer.load(work / "scorers/s1").config.encoder == str(work / "bert")
    cfg = work / "scorers/s1/scorer_config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "encoder": "project/bert"}))  # the older form
    assert Scorer.load(work / "scorers/s1").config.encoder == "project/bert"
