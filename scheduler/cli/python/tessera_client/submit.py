"""What travels with a job, as ``tessera submit`` sends it: the job's text, its scene's text
(or, for a binary scene such as a .blend, the file as an asset), and every file it reads as a
content-addressed blob (SHA-256), uploaded only when the farm lacks it, in resumable pieces."""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Union

from .config import read_yaml
from .errors import CancelledError, InvalidInputError, TransferError
from .paths import path_problem
from .transport import Transport

__all__ = ["SubmitProgress", "PreparedJob", "prepare_job", "hash_file", "upload_blob",
           "is_job_template"]

JobInput = Union[Mapping[str, Any], str, "os.PathLike[str]"]

# Upload pieces: well under the API's 16 MiB piece limit, large enough to keep a link busy.
_PIECE_BYTES = 8 << 20
_HASH_BLOCK = 1 << 20
# The renderer whose scene is the farm's own YAML (the files it names travel as assets).
_PATHTRACER = "pathtracer"
_TEMPLATE_LINE = re.compile(r"^specificationVersion:\s*['\"]?jobtemplate-", re.MULTILINE)


@dataclass
class SubmitProgress:
    """Where a submission is: ``stage`` is hashing, checking, uploading, submitting or
    submitted; while uploading, ``done`` of ``total`` files and the current file's bytes."""

    stage: str
    done: int = 0
    total: int = 0
    name: str = ""
    bytes_done: int = 0
    bytes_total: int = 0


@dataclass
class PreparedJob:
    """A job read and checked here: the request body (assets still to be filled in with their
    hashes) and the local file behind each asset name."""

    body: Dict[str, Any]
    files: Dict[str, Path] = field(default_factory=dict)
    template: bool = False


def is_job_template(job: Any) -> bool:
    """Whether a job (a dict, or a file's text) is an Open Job Description template."""
    if isinstance(job, Mapping):
        return str(job.get("specificationVersion", "")).startswith("jobtemplate-")
    return bool(_TEMPLATE_LINE.search(job))


def _read_text(path: Path, what: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInputError(f"{what}: no such file {path}") from None
    except IsADirectoryError:
        raise InvalidInputError(f"{what}: {path} is a directory, not a file") from None
    except UnicodeDecodeError as e:
        raise InvalidInputError(f"{what}: {path} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise InvalidInputError(f"{what}: cannot read {path}: {e.strerror}") from None


def _is_text(path: Path) -> bool:
    """A scene the farm takes as text: UTF-8 without NUL bytes. Anything else (a .blend) travels
    as an asset under its file name. Reads until the first byte that says binary."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(_HASH_BLOCK), b""):
                if b"\0" in block:
                    return False
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    except OSError as e:
        raise InvalidInputError(f"scene: cannot read {path}: {e.strerror}") from None
    return True


def _scene_files(scene_text: str, what: str) -> List[str]:
    """The relative files a path-tracer scene names: environment map, textures, meshes."""
    scene = read_yaml(scene_text, what)
    if not isinstance(scene, dict):
        return []
    found: List[str] = []
    background = scene.get("background")
    if isinstance(background, dict):
        found.append(background.get("environment"))
    materials = scene.get("materials")
    if isinstance(materials, dict):
        found += [m.get("texture") for m in materials.values() if isinstance(m, dict)]
    objects = scene.get("objects")
    if isinstance(objects, list):
        found += [o.get("file") for o in objects if isinstance(o, dict) and o.get("type") == "mesh"]
    return sorted({f for f in found if isinstance(f, str) and f and not f.startswith("/")})


def _step_files(job: Mapping[str, Any], base_dir: Path, what: str) -> Tuple[Optional[str],
                                                                            Dict[str, Path]]:
    """One job (or step): its scene's text (None for an inline or binary scene) and its files."""
    files: Dict[str, Path] = {}
    scene = job.get("scene")
    scene_text: Optional[str] = None
    scene_dir = base_dir
    if isinstance(scene, str) and scene:
        scene_path = Path(scene) if os.path.isabs(scene) else base_dir / scene
        scene_dir = scene_path.parent
        if not scene_path.is_file():
            raise InvalidInputError(f"{what}: scene: no such file {scene_path}")
        if _is_text(scene_path):
            scene_text = _read_text(scene_path, f"{what}: scene")
            if job.get("renderer", _PATHTRACER) == _PATHTRACER:
                for name in _scene_files(scene_text, str(scene_path)):
                    files[name] = scene_dir / name
        else:
            files[scene_path.name] = scene_path
            scene_text = ""
    listed = job.get("assets") or []
    if not isinstance(listed, list):
        raise InvalidInputError(f"{what}: assets: expected a list of paths")
    for name in listed:
        files[str(name)] = scene_dir / str(name)
    return scene_text, files


def prepare_job(job: JobInput, files: Optional[Mapping[str, Union[str, os.PathLike]]] = None,
                parameters: Optional[Mapping[str, Any]] = None,
                base_dir: Optional[Union[str, os.PathLike]] = None) -> PreparedJob:
    """Reads a job (a dict, or the path of a job file or OpenJD template) and finds every file it
    needs. `files` adds or overrides asset name -> local path; `base_dir` is where relative paths
    of a dict job start (default: the current folder; a file's own folder for a file).

    Raises InvalidInputError naming the file and field for anything the farm would refuse to
    receive (a missing file, a path that leaves the task folder).
    """
    if isinstance(job, Mapping):
        text = json.dumps(dict(job), ensure_ascii=False, default=str)
        where = "job"
        base = Path(base_dir) if base_dir is not None else Path.cwd()
        parsed: Any = dict(job)
    else:
        path = Path(job)
        text = _read_text(path, "job")
        where = str(path)
        base = Path(base_dir) if base_dir is not None else path.parent
        parsed = None if is_job_template(text) else read_yaml(text, where)

    if is_job_template(parsed if parsed is not None else text):
        # A template carries its scripts; the scheduler translates it with the parameters.
        body = {"job_yaml": text,
                "parameters": {str(k): str(v) for k, v in (parameters or {}).items()}}
        return PreparedJob(body=body, template=True)
    if parameters:
        raise InvalidInputError(f"parameters: only Open Job Description templates take "
                                f"parameters; {where} is a Tessera job")
    if not isinstance(parsed, dict):
        raise InvalidInputError(f"{where}: expected a map of job keys")

    body: Dict[str, Any] = {"job_yaml": text}
    assets: Dict[str, Path] = {}
    steps = parsed.get("steps")
    if isinstance(steps, list) and steps:
        scenes: Dict[str, str] = {}
        for i, step in enumerate(steps):
            if not isinstance(step, dict):
                raise InvalidInputError(f"{where}: steps[{i}]: expected a map")
            merged = {**{k: v for k, v in parsed.items() if k != "steps"}, **step}
            scene_text, found = _step_files(merged, base, f"{where}: steps[{i}]")
            if scene_text is not None:
                scenes[str(step.get("name", i))] = scene_text
            assets.update(found)
        if scenes:
            body["step_scenes"] = scenes
    else:
        scene_text, assets = _step_files(parsed, base, where)
        if scene_text is not None:
            body["scene_yaml"] = scene_text
    for name, local in (files or {}).items():
        assets[name] = Path(local)
    for name, local in assets.items():
        problem = path_problem(name)
        if problem:
            raise InvalidInputError(f"{where}: assets: '{name}' {problem}")
        if not local.is_file():
            raise InvalidInputError(f"{where}: asset '{name}': no such file {local}")
    return PreparedJob(body=body, files=assets)


def _check_cancel(cancel: Optional[threading.Event]) -> None:
    if cancel is not None and cancel.is_set():
        raise CancelledError("cancelled; no job was submitted")


def hash_file(path: Path, cancel: Optional[threading.Event] = None) -> Tuple[str, int]:
    """The SHA-256 (hex) and size of a file, read in blocks."""
    digest = hashlib.sha256()
    size = 0
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(_HASH_BLOCK), b""):
                _check_cancel(cancel)
                digest.update(block)
                size += len(block)
    except OSError as e:
        raise InvalidInputError(f"cannot read {path}: {e.strerror}") from None
    return digest.hexdigest(), size


def upload_blob(transport: Transport, path: Path, sha256: str, size: int,
                cancel: Optional[threading.Event] = None,
                on_bytes: Optional[Callable[[int], None]] = None) -> bool:
    """Uploads a file as the blob `sha256` unless the farm has it, resuming an upload an earlier
    run left unfinished. Returns whether anything was uploaded."""
    state = transport.call("GET", f"/api/v1/blobs/{sha256}")
    if state.get("complete"):
        return False
    offset = int(state.get("received") or 0)
    if not 0 <= offset <= size:  # an upload of other bytes under this hash: start over
        offset = 0
    try:
        f = open(path, "rb")
    except OSError as e:
        raise InvalidInputError(f"cannot read {path}: {e.strerror}") from None
    with f:
        while True:
            _check_cancel(cancel)
            f.seek(offset)
            piece = f.read(min(_PIECE_BYTES, size - offset))
            if len(piece) != min(_PIECE_BYTES, size - offset):
                raise TransferError(f"{path}: the file changed while it was uploaded")
            sent = transport.call_bytes(
                "PUT", f"/api/v1/blobs/{sha256}?offset={offset}&total={size}", piece)
            offset = int(sent.get("received", offset + len(piece)))
            if on_bytes is not None:
                on_bytes(offset)
            if sent.get("complete"):
                return True
            if offset >= size:
                raise TransferError(f"{path}: the scheduler did not confirm the upload")
