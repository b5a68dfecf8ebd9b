"""LoRA adapters as a variant's `adapter:`: a PEFT folder (vLLM, transformers) or llama.cpp's GGUF adapter, read and
checked against the base weights before any engine starts, each problem one line naming the file and the field."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from offline_eval.modelfiles.quantization import non_finite_tensors, safetensors_header
from offline_eval.runtime.errors import InputError

CONFIG, WEIGHTS = "adapter_config.json", "adapter_model.safetensors"
_PEFT_KEY = re.compile(r"^base_model\.model\.(.+)\.lora_([AB])\.weight$")
# The base's tensor for a module, as a plain, compressed-tensors or GPTQ/AWQ folder names it.
_BASE_SUFFIXES = (".weight", ".weight_packed", ".qweight")


@dataclass(frozen=True)
class PeftAdapter:
    """A PEFT LoRA folder: what its config says and the shapes its weights have."""

    path: str
    rank: int
    alpha: float
    rslora: bool
    targets: tuple[str, ...]
    base: str | None  # base_model_name_or_path, as written
    modules: dict[str, tuple[list[int], list[int]]] = field(default_factory=dict)  # module -> (A shape, B shape)

    @property
    def scaling(self) -> float:
        """What PEFT multiplies B·A by: alpha / r (rsLoRA: alpha / sqrt(r))."""
        return self.alpha / (math.sqrt(self.rank) if self.rslora else self.rank)

    def describe(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "format": "peft",
            "rank": self.rank,
            "alpha": self.alpha,
            "rslora": self.rslora,
            "target_modules": list(self.targets),
            "base_model_name_or_path": self.base,
        }


def read_peft(path: str | Path) -> PeftAdapter:
    """The adapter in a PEFT folder, or an InputError naming the file and the field."""
    p = Path(path)
    if p.is_file():
        if p.suffix == ".gguf":
            raise InputError("a GGUF adapter is llama.cpp's; this engine reads a PEFT folder "
                             f"({CONFIG} + {WEIGHTS})", file=str(p), field="adapter")  # fmt: skip
        raise InputError(f"an adapter is a PEFT folder ({CONFIG} + {WEIGHTS})", file=str(p), field="adapter")
    cfg_file, weights = p / CONFIG, p / WEIGHTS
    for f in (cfg_file, weights):
        if not f.is_file():
            raise InputError(f"not a PEFT adapter folder: {f.name} is missing", file=str(p), field="adapter")
    try:
        cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"not readable JSON ({e})", file=str(cfg_file)) from None
    if not isinstance(cfg, dict):
        raise InputError("expected a JSON object", file=str(cfg_file))

    def bad(key: str, why: str) -> InputError:
        return InputError(why, file=str(cfg_file), field=key)

    if str(cfg.get("peft_type", "LORA")).upper() != "LORA":
        raise bad("peft_type", f"'{cfg.get('peft_type')}': only LoRA adapters are supported")
    if cfg.get("use_dora"):
        raise bad("use_dora", "DoRA adapters are not supported (vLLM and llama.cpp have no DoRA)")
    if cfg.get("modules_to_save"):
        raise bad("modules_to_save", "adapters that replace whole modules are not supported (vLLM refuses them)")
    if cfg.get("bias", "none") != "none":
        raise bad("bias", f"'{cfg.get('bias')}': adapters with trained biases are not supported")
    for key in ("rank_pattern", "alpha_pattern"):
        if cfg.get(key):
            raise bad(key, "per-module ranks or alphas are not supported (llama.cpp's adapter has one alpha)")
    rank, alpha = cfg.get("r"), cfg.get("lora_alpha", 8)  # PEFT's own default alpha
    if not isinstance(rank, int) or isinstance(rank, bool) or rank < 1:
        raise bad("r", f"the rank must be a positive integer, not {rank!r}")
    if not isinstance(alpha, (int, float)) or isinstance(alpha, bool) or not math.isfinite(alpha) or alpha <= 0:
        raise bad("lora_alpha", f"must be a positive number, not {alpha!r}")
    if not isinstance(cfg.get("use_rslora", False), bool):
        raise bad("use_rslora", f"must be true or false, not {cfg.get('use_rslora')!r}")
    said_base = cfg.get("base_model_name_or_path")
    if said_base is not None and not isinstance(said_base, str):
        raise bad("base_model_name_or_path", f"must be a string, not {said_base!r}")
    listed = cfg.get("target_modules")
    if listed is not None and not (
        isinstance(listed, str) or (isinstance(listed, list) and all(isinstance(x, str) for x in listed))
    ):
        raise bad("target_modules", f"must be a module name or a list of them, not {listed!r}")
    for key in ("target_modules", "exclude_modules"):
        if isinstance(cfg.get(key), str):
            try:
                re.compile(cfg[key])
            except re.error as e:
                raise bad(key, f"{cfg[key]!r} is not a regular expression ({e})") from None
    modules: dict[str, tuple[list[int], list[int]]] = {}
    for name, info in safetensors_header(weights).items():
        m = _PEFT_KEY.match(name)
        if m is None:
            raise InputError("not a LoRA tensor (expected base_model.model.<module>.lora_A/B.weight)",
                             file=str(weights), field=name)  # fmt: skip
        a, b = modules.get(m.group(1), ([], []))
        shape = list(info.get("shape", []))
        modules[m.group(1)] = (shape, b) if m.group(2) == "A" else (a, shape)
    for mod, (a, b) in modules.items():
        if len(a) != 2 or len(b) != 2 or a[0] != rank or b[1] != rank:
            raise InputError(f"lora_A {a} and lora_B {b} do not make a rank-{rank} pair (r in {CONFIG})",
                             file=str(weights), field=mod)  # fmt: skip
    if not modules:
        raise InputError("holds no LoRA tensors", file=str(weights))
    if why := _untargeted(
        modules, listed, cfg.get("layers_to_transform"), cfg.get("layers_pattern"), cfg.get("exclude_modules")
    ):
        raise InputError(why, file=str(cfg_file), field="target_modules")
    if broken := non_finite_tensors(weights):
        raise InputError(f"holds NaN or infinite weights ({len(broken)} tensor{'s' if len(broken) > 1 else ''}): a diverged "
                         "training run; its answers would be noise, and vLLM's shared engine would pass the NaNs on "
                         "to the next adapter", file=str(weights), field=broken[0])  # fmt: skip
    targets = listed or sorted({m.rsplit(".", 1)[-1] for m in modules})
    return PeftAdapter(
        path=str(p),
        rank=rank,
        alpha=float(alpha),
        rslora=bool(cfg.get("use_rslora")),
        targets=tuple([targets] if isinstance(targets, str) else targets),
        base=said_base,
        modules=modules,
    )


def _untargeted(modules: dict[str, Any], listed: Any, layers: Any, pattern: Any, exclude: Any) -> str | None:
    """Where the config and the weights disagree: peft applies a tensor only to a module that `target_modules` and
    `layers_to_transform` name, while vLLM and llama.cpp apply every tensor in the file, so the same adapter would
    answer differently per engine. Matched as peft matches: a string is a regular expression the whole module name
    matches (`all-linear`: every linear module), a list names module suffixes."""
    if layers is not None and not (
        (isinstance(layers, int) and not isinstance(layers, bool))
        or (isinstance(layers, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in layers))
    ):
        return f"layers_to_transform must be a layer number or a list of them, not {layers!r}"
    if pattern is not None and not (isinstance(pattern, str) or isinstance(pattern, list)):
        return f"layers_pattern must be a name or a list of names, not {pattern!r}"
    wanted = {layers} if isinstance(layers, int) else set(layers) if layers is not None else None
    names = [pattern] if isinstance(pattern, str) else list(pattern or ["layers", "h", "blocks", "layer"])
    for mod in sorted(modules):
        targeted = listed is None or listed == "all-linear" or _named(mod, listed)
        if targeted and exclude:
            targeted = not _named(mod, exclude)
        if targeted and wanted is not None:
            at = re.search(r"\.(?:" + "|".join(map(re.escape, names)) + r")\.(\d+)\.", f".{mod}")
            targeted = at is not None and int(at.group(1)) in wanted
        if not targeted:
            return (
                f"the weights adapt {mod}, which target_modules {listed!r}"
                + (f" with layers_to_transform {layers!r}" if wanted is not None else "")
                + " leaves out: peft would skip those tensors and vLLM and llama.cpp apply them, so each engine "
                "would run another adapter; make the config name exactly the modules the weights hold"
            )
    return None


def _named(module: str, names: Any) -> bool:
    """peft's match: a string is a regular expression of the whole name, a list names suffixes."""
    if isinstance(names, str):
        return re.fullmatch(names, module) is not None
    return any(module == t or module.endswith(f".{t}") for t in names)


def base_shapes(folder: str | Path) -> dict[str, list[int]]:
    """Every tensor of an HF model folder, name -> shape (headers only: nothing is loaded)."""
    out: dict[str, list[int]] = {}
    for f in sorted(Path(folder).glob("*.safetensors")):
        out.update({k: list(v.get("shape", [])) for k, v in safetensors_header(f).items()})
    return out


def peft_fit_problem(adapter: PeftAdapter, base: str | Path) -> str | None:
    """Why the adapter cannot go on these base weights (a module the base lacks, a size that differs); None: it
    fits. A packed int4 base is checked on its output size only."""
    shapes = base_shapes(base)
    if not shapes:
        return None  # no safetensors (e.g. .bin weights): the engine checks when it loads
    weights = str(Path(adapter.path) / WEIGHTS)
    for mod, (a, b) in sorted(adapter.modules.items()):
        found = next(((s, shapes[mod + s]) for s in _BASE_SUFFIXES if mod + s in shapes), None)
        if found is None:
            return f"{weights}: field '{mod}': the base model {base} has no module {mod} (target_modules in {CONFIG})"
        suffix, shape = found
        if not _fits(suffix, shape, a[1], b[0]):
            return (
                f"{weights}: field '{mod}': the adapter maps {a[1]} -> {b[0]}, but the base's {mod}{suffix} is "
                f"{shape}: it was trained on another model"
            )
    bases = {k.rsplit(".", 1)[0] for k in shapes}
    for t in adapter.targets:  # a name (not a regular expression) that no module of the base ends with
        if re.fullmatch(r"\w+", t) and not any(m == t or m.endswith(f".{t}") for m in bases):
            return f"{Path(adapter.path) / CONFIG}: field 'target_modules': the base model {base} has no module {t}"
    return None


def _fits(suffix: str, shape: list[int], n_in: int, n_out: int) -> bool:
    """Whether a module of these input and output sizes is the base's tensor: plain [out, in]; compressed-tensors'
    packed int4 [out, in/8]; GPTQ's qweight [in/8, out] or AWQ's [in, out/8] (eight int4 values per int32)."""
    if len(shape) != 2:
        return True  # a layout not known here: the engine checks when it loads
    if suffix == ".weight":
        return shape == [n_out, n_in]
    if suffix == ".weight_packed":
        return shape[0] == n_out
    return shape in ([n_in // 8, n_out], [n_in, n_out // 8])


def base_mismatch(adapter: PeftAdapter, base: str | Path) -> str | None:
    """A warning where the adapter's base_model_name_or_path does not name this base folder (a renamed copy is
    common, so only a warning: the shapes decide)."""
    if not adapter.base:
        return None
    said = adapter.base.rstrip("/").split("/")[-1].lower()
    folder = Path(base).resolve()
    names = {folder.name.lower(), folder.parent.name.lower()}
    try:
        own = json.loads((folder / "config.json").read_text(encoding="utf-8")).get("_name_or_path") or ""
        names.add(str(own).rstrip("/").split("/")[-1].lower())
    except (OSError, ValueError, AttributeError):
        pass
    if said in names or any(n.startswith(f"{said}-") for n in names):  # a quantized copy: gemma-3-270m-w4a16
        return None
    return (
        f"adapter {adapter.path} was trained on '{adapter.base}' (base_model_name_or_path), and is given "
        f"{base}: its shapes fit, so it runs"
    )


def gguf_adapter_problem(adapter: str | Path, base: str | Path) -> str | None:
    """Why a llama.cpp adapter cannot go on this GGUF base; None: it fits (llama.cpp aborts on the rest)."""
    import gguf

    p = Path(adapter)
    if p.is_dir():
        return (f"{p}: field 'adapter': llama.cpp reads a GGUF adapter; convert this PEFT folder with "
                f"`offline-eval adapter gguf {p} --base {base}`")  # fmt: skip
    try:
        a, b = gguf.GGUFReader(str(p)), gguf.GGUFReader(str(base))
    except (OSError, ValueError) as e:
        return f"{p}: not a readable GGUF file ({e})"
    kind, arch = gguf_field(a, "general.type"), gguf_field(a, "general.architecture")
    if kind != "adapter" or gguf_field(a, "adapter.type") != "lora":
        return f"{p}: field 'general.type': '{kind}': not a GGUF LoRA adapter"
    if gguf_field(a, "adapter.lora.alpha") is None:
        return f"{p}: field 'adapter.lora.alpha': missing (llama.cpp aborts without it)"
    if arch != (base_arch := gguf_field(b, "general.architecture")):
        return f"{p}: field 'general.architecture': the adapter is for '{arch}', the base {base} is '{base_arch}'"
    shapes = {t.name: [int(x) for x in t.shape] for t in b.tensors}
    pairs: dict[str, dict[str, list[int]]] = {}
    for t in a.tensors:
        name, _, side = t.name.rpartition(".lora_")
        pairs.setdefault(name, {})[side] = [int(x) for x in t.shape]
    for tensor, ab in sorted(pairs.items()):
        if tensor not in shapes:
            return f"{p}: field '{tensor}': the base {base} has no tensor {tensor}"
        la, lb, w = ab.get("a"), ab.get("b"), shapes[tensor]
        if la is None or lb is None or la[0] != w[0] or lb[1] != w[1] or la[1] != lb[0]:
            return f"{p}: field '{tensor}': lora_a {la} and lora_b {lb} do not fit the base's {tensor} {w}"
    return None


def gguf_field(reader: Any, key: str) -> Any:
    """A GGUF metadata value (a string or a number); None where the key is absent."""
    f = reader.fields.get(key)
    if f is None:
        return None
    value = f.parts[f.data[0]]
    if f.types and f.types[0].name == "STRING":
        return bytes(value).decode("utf-8")
    return value.tolist()[0]


SERVED = (
    "a served model's adapter is the server's: start it with the adapter (vLLM: --enable-lora --lora-modules "
    "NAME=PEFT_FOLDER, then model: NAME; llama.cpp's server: --lora FILE.gguf) and leave `adapter:` out"
)


def adapter_problem(
    weights: str, adapter: str, base: str, engine_problem: Callable[[PeftAdapter], str | None] = lambda a: None
) -> str | None:
    """Why `adapter` cannot run on the base `base` of an engine reading `weights` (declare.Weights), or on the
    engine itself (`engine_problem`: a rank it cannot hold, say); None: it can."""
    if weights == "remote":
        return SERVED
    if weights == "gguf":
        return gguf_adapter_problem(adapter, base)
    try:
        peft = read_peft(adapter)
    except InputError as e:
        return str(e)
    return peft_fit_problem(peft, base) or engine_problem(peft)


def describe_adapter(path: str | Path) -> dict[str, Any]:
    """What the provenance says of an adapter: its format, rank, alpha, target modules and declared base."""
    p = Path(path)
    if p.is_dir():
        return read_peft(p).describe()
    import gguf

    r = gguf.GGUFReader(str(p))
    ranks = sorted({int(t.shape[1]) for t in r.tensors if t.name.endswith(".lora_a")})
    return {
        "path": str(p),
        "format": "gguf",
        "rank": ranks[0] if len(ranks) == 1 else ranks,
        "alpha": gguf_field(r, "adapter.lora.alpha"),
        "architecture": gguf_field(r, "general.architecture"),
        "target_modules": sorted({t.name.split(".")[2] for t in r.tensors if t.name.startswith("blk.")}),
        "base_model_name_or_path": gguf_field(r, "general.base_model.0.name"),
    }
