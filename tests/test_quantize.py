"""`offline-eval quantize` from an already quantized GGUF: it works, and every output says it was requantized."""

from __future__ import annotations

from conftest import TINY, run_cli
from test_bad_input import assert_one_line_error


def test_requantize_is_labelled_in_the_name_and_a_line(tmp_path, tiny):
    proc = run_cli("quantize", str(TINY / "gguf" / "tiny-q8_0.gguf"), "--to", "q4_0,f16", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tiny-f16-from-q8_0.gguf", "tiny-q4_0-from-q8_0.gguf"]
    assert (
        "tiny-q4_0-from-q8_0.gguf: requantized from Q8_0, not from the original weights (rounding errors compound)"
        in proc.stdout
    )
    assert (
        "tiny-f16-from-q8_0.gguf: requantized from Q8_0, not from the original weights (no more precise" in proc.stdout
    )
    from llama_cpp import Llama

    llm = Llama(model_path=str(tmp_path / "tiny-q4_0-from-q8_0.gguf"), verbose=False, n_ctx=128)
    assert llm.metadata["general.file_type"] == "2"  # LLAMA_FTYPE_MOSTLY_Q4_0
    llm.close()


def test_plain_quantize_from_f16_is_not_labelled(tmp_path, tiny):
    proc = run_cli("quantize", str(TINY / "gguf" / "tiny-f16.gguf"), "--to", "q4_0", "--out-dir", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["tiny-q4_0.gguf"]
    assert "requantized" not in proc.stdout


def test_requantize_to_the_same_type_is_refused(tmp_path, tiny):
    src = str(TINY / "gguf" / "tiny-q8_0.gguf")
    assert_one_line_error(
        run_cli("quantize", src, "--to", "q4_0,q8_0", "--out-dir", str(tmp_path)), src, "--to", "already Q8_0"
    )
    assert not list(tmp_path.iterdir())


def test_not_a_gguf_is_one_line(tmp_path):
    bad = tmp_path / "x.gguf"
    bad.write_bytes(b"not a gguf at all")
    assert_one_line_error(run_cli("quantize", str(bad), "--to", "q4_0"), str(bad), "not a GGUF file")
