"""What a vLLM load starts with, from its spec and the platform's facts: engine_args is pure, so every branch of the
start is checked here without vLLM (the engine tests start it for real)."""

from __future__ import annotations

import pytest

from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.backends.vllm.args import W4A8, W4A16_AMX, Platform, engine_args
from offline_eval.modelfiles.quantization import FolderQuantization
from offline_eval.runtime.errors import InputError

CPU = Platform(on_cpu=True, one_process=True, in_process=True)
GPU = Platform(on_cpu=False, one_process=True, in_process=True)
W4A16 = FolderQuantization("compressed-tensors", "w4a16", "pack-quantized", 4, 128, None, True)
W8A8 = FolderQuantization("compressed-tensors", "w8a8", "int-quantized", 8, None, "int8 dynamic per-token", True)
FP8 = FolderQuantization("compressed-tensors", "fp8", "float-quantized", 8, None, "fp8", True)


def spec(**kw: object) -> LoadSpec:
    return LoadSpec(name="m", backend="vllm", path="/models/m", max_model_len=2048, **kw)  # type: ignore[arg-type]


def test_the_cpu_start_keeps_the_engine_core_in_this_process_and_reserves_a_tenth_of_ram():
    a = engine_args(spec(seed=7), None, CPU)
    assert a.env == {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_ENABLE_V1_MULTIPROCESSING": "0"}
    assert a.kwargs == {
        "model": "/models/m",
        "tokenizer": "/models/m",
        "max_model_len": 2048,
        "seed": 7,
        "trust_remote_code": False,
        "tensor_parallel_size": 1,
        "enable_prefix_caching": True,
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
        "gpu_memory_utilization": 0.1,
    }
    assert a.int4 is None and a.piecewise  # cpu_compile: piecewise is the default
    sharded = engine_args(spec(tensor_parallel_size=2), None, Platform(True, one_process=False, in_process=False))
    assert sharded.env == {"VLLM_CPU_KVCACHE_SPACE": "1"}


def test_a_gpu_start_sets_no_environment_and_takes_the_gpu_share():
    a = engine_args(spec(dtype="float16", gpu_memory_utilization=0.5), None, GPU)
    assert a.env == {} and a.kwargs["gpu_memory_utilization"] == 0.5 and a.kwargs["dtype"] == "float16"
    assert engine_args(spec(), None, GPU).kwargs["gpu_memory_utilization"] == 0.9


def test_quantization_is_passed_only_where_the_folder_does_not_declare_it():
    assert engine_args(spec(quantization="fp8"), None, GPU).kwargs["quantization"] == "fp8"
    assert "quantization" not in engine_args(spec(quantization="compressed-tensors"), W8A8, GPU).kwargs


def test_outlines_gets_no_whitespace_switch_and_the_users_engine_args_come_last():
    a = engine_args(spec(constraint_backend="outlines", engine_args={"max_num_seqs": 4, "seed": 1}), None, CPU)
    assert a.kwargs["structured_outputs_config"] == {"backend": "outlines"}
    assert a.kwargs["max_num_seqs"] == 4 and a.kwargs["seed"] == 1


def test_a_quantized_folder_on_the_cpu_runs_bfloat16_and_takes_the_w4a16_path_where_amx_starts_here():
    amx = Platform(True, True, True, int4_kernel=W4A16_AMX)
    a = engine_args(spec(), W4A16, amx)
    assert a.kwargs["dtype"] == "bfloat16" and a.int4 == W4A16_AMX and a.env["VLLM_CPU_INT4_W4A8"] == "0"
    elsewhere = engine_args(spec(), W4A16, Platform(True, False, False, int4_kernel=W4A8))
    assert elsewhere.int4 == W4A8 and "VLLM_CPU_INT4_W4A8" not in elsewhere.env
    w8 = engine_args(spec(dtype="bf16"), W8A8, CPU)
    assert w8.int4 is None and w8.kwargs["dtype"] == "bfloat16"


@pytest.mark.parametrize(
    ("folder", "kw", "facts", "field", "words"),
    [
        (FP8, {}, CPU, "quantization_config", "needs a GPU"),
        (W8A8, {"dtype": "float32"}, CPU, "dtype", "take bfloat16 activations"),
        (W4A16, {}, Platform(True, True, True, "w4a16 (cpu_gemm_wna16)", "no int4 kernel"), "quantization_config",
         "no int4 kernel"),
    ],
)  # fmt: skip
def test_what_the_cpu_build_cannot_run_is_one_line_naming_the_folders_config(folder, kw, facts, field, words):
    with pytest.raises(InputError) as e:
        engine_args(spec(**kw), folder, facts)
    assert e.value.field == field and words in str(e.value)
    if field == "quantization_config":
        assert e.value.file == "/models/m/config.json"


def test_the_model_compiles_in_pieces_only_on_the_cpu_in_this_process_when_asked():
    piecewise = {"cpu_compile": "piecewise"}
    assert engine_args(spec(engine_options=piecewise), None, CPU).piecewise
    assert not engine_args(spec(engine_options=piecewise), None, GPU).piecewise
    assert not engine_args(spec(engine_options=piecewise), None, Platform(True, True, False)).piecewise
    assert not engine_args(spec(engine_options={"cpu_compile": "whole"}), None, CPU).piecewise
