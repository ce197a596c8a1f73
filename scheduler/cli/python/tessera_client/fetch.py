"""Downloading a job's output files into a folder, safely and resumably.

Every name the server lists is a path inside the destination: it must pass the farm's rule for
relative paths (no '..', nothing absolute, plain characters), no folder on the way may be a
link, and the file is written through ``NAME.part`` (opened without following links) and
renamed when whole. A file is checked against the size (and SHA-256, when the listing gives
one) the API listed; one already there whole is kept, and a ``.part`` left by an interrupted
fetch is continued with a ``Range`` request when the server honours it.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import stat
import threading
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from .errors import CancelledError, TransferError, UnsafePathError
from .models import OutputFile
from .paths import path_problem
from .transport import Transport

__all__ = ["FetchProgress", "check_name", "safe_folder", "safe_target", "download_output", "is_whole"]

_BLOCK_BYTES = 1 << 20  # read and hashed a block at a time


@dataclass
class FetchProgress:
    """Where a fetch is: file ``index`` (from 1) of ``count``, and that file's bytes."""

    name: str
    index: int
    count: int
    bytes_done: int
    bytes_total: int


def check_name(name: object, what: str = "file") -> None:
    """Raises UnsafePathError unless `name` (from the server) is a plain relative path."""
    problem = path_problem(name)
    if problem:
        raise UnsafePathError(f"the server named a {what} '{name!s:.200}', which {problem}; "
                              "nothing is written outside the destination folder")


def safe_folder(root: Path, part: str) -> Path:
    """The folder `part` (one plain name from the server) inside `root`, created if missing.
    Raises UnsafePathError for a name with a '/', or a link or file in its place."""
    check_name(part, "folder")
    if "/" in part:
        raise UnsafePathError(f"the server named a folder '{part:.200}' with a '/'; nothing is "
                              "written")
    folder = root / part
    try:
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        os.mkdir(folder)
        return folder
    if not stat.S_ISDIR(mode):
        raise UnsafePathError(f"{folder} is a link or a file, not a folder; not written")
    return folder


def safe_target(root: Path, name: str) -> Path:
    """The path `name` (from the server) names inside `root`, creating its folders. Raises
    UnsafePathError, writing nothing, for a name or a folder that could lead outside `root`."""
    check_name(name, "file")
    parts = name.split("/")
    current = root
    for part in parts[:-1]:
        current = safe_folder(current, part)
    target = current / parts[-1]
    for path in (target, target.with_name(target.name + ".part")):
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            continue
        if not stat.S_ISREG(mode):
            raise UnsafePathError(f"{name}: {path} exists and is not a plain file (a link?); "
                                  "not written")
    return target


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK_BYTES), b""):
            digest.update(block)
    return digest.hexdigest()


def is_whole(target: Path, listed: OutputFile) -> bool:
    """Whether `target` already holds the listed file (size, and SHA-256 when given)."""
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(st.st_mode) or st.st_size != listed.size:
        return False
    return listed.sha256 is None or _sha256(target) == listed.sha256


def download_output(transport: Transport, job_id: int, listed: OutputFile, target: Path,
                    cancel: Optional[threading.Event] = None,
                    on_bytes: Optional[Callable[[int], None]] = None) -> int:
    """Downloads one listed output file to `target` (see the module's notes); returns the bytes
    received. Raises TransferError when what arrives is not what was listed."""
    name, size = listed.name, listed.size
    part = target.with_name(target.name + ".part")
    try:
        have = os.lstat(part).st_size
    except FileNotFoundError:
        have = 0
    if have > size:
        os.remove(part)
        have = 0
    url = f"/api/v1/jobs/{job_id}/outputs/{urllib.parse.quote(name, safe='/')}"
    headers = {"Range": f"bytes={have}-"} if have else {}
    response = transport.open("GET", url, headers=headers)
    received = 0
    with response:
        resumed = (have > 0 and response.status == 206 and
                   (response.headers.get("Content-Range") or "").startswith(f"bytes {have}-"))
        if not resumed:
            have = 0
        flags = os.O_WRONLY | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        flags |= os.O_APPEND if resumed else os.O_TRUNC
        with os.fdopen(os.open(part, flags, 0o644), "wb") as out:
            written = have
            while True:
                if cancel is not None and cancel.is_set():
                    raise CancelledError(f"fetch cancelled in {name} ({written} of {size} bytes; "
                                         "fetch again to resume)")
                try:
                    block = response.read(min(_BLOCK_BYTES, size - written + 1))
                except (OSError, http.client.HTTPException) as e:
                    raise TransferError(f"{name}: the download broke off after {written} of "
                                        f"{size} bytes ({e}); fetch again to resume") from None
                if not block:
                    break
                written += len(block)
                received += len(block)
                if written > size:
                    out.close()
                    os.remove(part)
                    raise TransferError(f"{name}: the server sent more than the {size} bytes "
                                        "it listed; the file was discarded")
                out.write(block)
                if on_bytes is not None:
                    on_bytes(written)
    if written < size:
        raise TransferError(f"{name}: {written} of the {size} bytes listed arrived; fetch again "
                            "to resume")
    if listed.sha256 is not None and _sha256(part) != listed.sha256:
        os.remove(part)
        raise TransferError(f"{name}: its SHA-256 is not the {listed.sha256} listed; the file "
                            "was discarded")
    os.replace(part, target)
    return received
