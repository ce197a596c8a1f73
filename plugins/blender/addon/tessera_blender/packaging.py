"""A copy of the open .blend for the farm, and the files it reads.

The artist's file is never changed: every external file of a local datablock (images, UDIM
tiles and sequences, movie clips, sounds, fonts, volumes, Alembic/USD caches, linked libraries)
gets a path relative to the copy, as the farm's task folder will hold it -- its own relative
path when it is already a plain one inside the .blend's folder, else
``external/<folder>-<hash>/<file>``. The datablocks point there only while the copy is written
and get their own paths back at once. Files that are not there are collected and the submit is
refused, naming them. Files that linked libraries read themselves are not carried (listed in
``not_carried``): render those from shared storage.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

import bpy

from .farm import tc

__all__ = ["PackedShot", "pack_shot", "MissingFilesError", "staging_folder"]

_LAST_DIGITS = re.compile(r"(\d+)(?!.*\d)")  # a sequence's frame number
_TOKENS = ("<UDIM>", "<UVTILE>")


class MissingFilesError(Exception):
    """External files the scene reads that are not there; nothing was submitted."""

    def __init__(self, missing: List[str]) -> None:
        shown = "; ".join(missing[:10])
        if len(missing) > 10:
            shown += f"; and {len(missing) - 10} more"
        super().__init__(f"{len(missing)} external file(s) are missing: {shown}")
        self.missing = missing


@dataclass
class PackedShot:
    """The copy to submit (its asset name and path) and every file it reads, by asset name."""

    scene_name: str
    scene_path: str
    files: Dict[str, str] = field(default_factory=dict)
    not_carried: List[str] = field(default_factory=list)


def _datablocks() -> List[Tuple[str, bpy.types.ID]]:
    """(kind, datablock) for every local datablock whose file the renderer reads."""
    found: List[Tuple[str, bpy.types.ID]] = []
    for image in bpy.data.images:
        if (image.library is None and not image.packed_file
                and image.source in {"FILE", "SEQUENCE", "MOVIE", "TILED"}):
            found.append(("image", image))
    for kind, collection in (("movie clip", bpy.data.movieclips), ("sound", bpy.data.sounds),
                             ("font", bpy.data.fonts), ("volume", bpy.data.volumes),
                             ("cache file", bpy.data.cache_files),
                             ("library", bpy.data.libraries)):
        for block in collection:
            if (block.library is None and not getattr(block, "packed_file", None)
                    and block.filepath not in ("", "<builtin>")):
                found.append((kind, block))
    return found


def _sequence(path: str) -> List[str]:
    """The frames of the sequence `path` is one of (same name but the last run of digits)."""
    folder, name = os.path.split(path)
    match = _LAST_DIGITS.search(name)
    if not match:
        return [path]
    pattern = (glob.escape(name[:match.start()]) + "[0-9]" * len(match.group(1)) +
               glob.escape(name[match.end():]))
    return sorted(glob.glob(os.path.join(glob.escape(folder), pattern))) or [path]


def _files_of(kind: str, block: bpy.types.ID, path: str) -> List[str]:
    """The files on disk one datablock's path stands for (UDIM tiles, a sequence's frames)."""
    if kind == "image" and block.source == "TILED":
        tiles = []
        for tile in block.tiles:
            index = tile.number - 1001
            uvtile = f"u{index % 10 + 1}_v{index // 10 + 1}"
            tiles.append(path.replace("<UDIM>", str(tile.number)).replace("<UVTILE>", uvtile))
        return tiles or [path]
    if (kind == "image" and block.source == "SEQUENCE") or getattr(block, "is_sequence", False):
        return _sequence(path)
    return [path]


def _safe_name(name: str) -> str:
    """A file name the farm accepts, keeping UDIM tokens (the tiles' names follow them)."""
    for i, token in enumerate(_TOKENS):
        name = name.replace(token, f"TSRTOKEN{i}")
    name = tc.safe_asset_name(name)
    for i, token in enumerate(_TOKENS):
        name = name.replace(f"TSRTOKEN{i}", token)
    return name


def _folder_for(rel: str, absolute_dir: str, plain: bool) -> str:
    """Where a folder's files go in the task folder: its own relative path when it is a plain
    one inside the .blend's folder, else external/<name>-<hash of where it is>."""
    if plain and (not rel or not tc.path_problem(rel + "/x")):
        return rel
    digest = hashlib.sha256(absolute_dir.encode("utf-8", "surrogateescape")).hexdigest()[:8]
    return f"external/{tc.safe_asset_name(os.path.basename(absolute_dir) or 'root')}-{digest}"


def _plan(blend_dir: str) -> Tuple[List[Tuple[bpy.types.ID, str, str, str]], Dict[str, str],
                                    List[str]]:
    """What changes in the copy, (datablock, attribute, old, new); the files by asset name; and
    the files that are missing."""
    changes: List[Tuple[bpy.types.ID, str, str, str]] = []
    files: Dict[str, str] = {}
    missing: List[str] = []
    for kind, block in _datablocks():
        raw = block.filepath
        absolute = os.path.normpath(bpy.path.abspath(raw))
        on_disk = _files_of(kind, block, absolute)
        gone = [p for p in on_disk if not os.path.isfile(p)]
        if gone:
            missing += [f"{kind} '{block.name}': {p}" for p in gone]
            continue
        folder = os.path.dirname(absolute)
        rel = os.path.relpath(folder, blend_dir).replace(os.sep, "/")
        rel = "" if rel == "." else rel
        plain = raw.startswith("//") and not rel.startswith("..")
        target = _folder_for(rel, folder, plain)
        for path in on_disk:
            asset = "/".join(filter(None, (target, _safe_name(os.path.basename(path)))))
            if files.setdefault(asset, path) != path:
                raise RuntimeError(f"two files would travel as '{asset}': {files[asset]}, {path}")
        new = "//" + "/".join(filter(None, (target, _safe_name(os.path.basename(absolute)))))
        if new != raw:
            attribute = "filepath_raw" if kind == "image" else "filepath"
            changes.append((block, attribute, getattr(block, attribute), new))
    return changes, files, missing


def staging_folder(blend_path: str) -> str:
    """A folder of its own for this .blend's copies (a second submit writes the same path)."""
    digest = hashlib.sha256(blend_path.encode("utf-8", "surrogateescape")).hexdigest()[:16]
    folder = os.path.join(tempfile.gettempdir(), "tessera-blender", digest)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    return folder


def pack_shot() -> PackedShot:
    """Writes the copy of the open .blend and lists its files; raises MissingFilesError."""
    blend_path = bpy.data.filepath
    changes, files, missing = _plan(os.path.dirname(blend_path))
    if missing:
        raise MissingFilesError(missing)
    name = tc.safe_asset_name(os.path.basename(blend_path))
    name = name if name.endswith(".blend") else name + ".blend"
    copy = os.path.join(staging_folder(blend_path), name)
    try:
        for block, attribute, _, new in changes:
            setattr(block, attribute, new)
        bpy.ops.wm.save_as_mainfile(filepath=copy, copy=True, relative_remap=False,
                                    compress=False)
    finally:
        for block, attribute, old, _ in reversed(changes):
            setattr(block, attribute, old)
    carried = {os.path.normpath(p) for p in files.values()} | {os.path.normpath(blend_path)}
    not_carried = sorted({os.path.normpath(p) for p in bpy.utils.blend_paths(absolute=True)
                          if os.path.isfile(p)} - carried)
    return PackedShot(name, copy, files, not_carried)
