"""The farm's rule for file names that travel (job assets, output files): a relative path of
plain parts, as shared/jobs/job_file.cpp's ValidateAssetPath checks it. A name that passes can be
joined to a folder without leaving it."""

from __future__ import annotations

import re
from typing import Optional

__all__ = ["path_problem", "safe_asset_name"]

_MAX_PATH = 512
_PART = re.compile(r"^[A-Za-z0-9 ._+-]+$")
_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9 ._+-]")


def path_problem(name: object) -> Optional[str]:
    """Why `name` is not a plain relative path the farm accepts, or None when it is."""
    if not isinstance(name, str) or not name or len(name) > _MAX_PATH:
        return "must be a path of 1..512 characters"
    if name.startswith("/"):
        return "must be a relative path"
    for part in name.split("/"):
        if part in ("", ".", ".."):
            return "has an empty, '.' or '..' part"
        if part.startswith("-"):
            return "has a part starting with '-'"
        if not _PART.match(part):
            return "may hold only letters, digits, ' ', '.', '_', '+', '-' and '/'"
    return None


def safe_asset_name(text: str) -> str:
    """`text` made into one path part the farm accepts (other characters become '_')."""
    part = _UNSAFE_CHARS.sub("_", text).strip(" ")
    part = part.lstrip("-.") or "file"
    return part[:200]
