#!/usr/bin/env python3
"""Builds the Blender add-on with the Python client inside it: the folder tessera_blender/
(this folder's add-on plus a copy of scheduler/cli/python/tessera_client), and/or the zip
Blender installs (Preferences > Add-ons > Install...). CMake runs it for the target
`blender_addon` (build/addons/tessera_blender.zip); by hand:

    python3 plugins/blender/addon/build_addon.py --zip /tmp/tessera_blender.zip
"""

from __future__ import annotations

import argparse
import shutil
import sys
import zipfile
from pathlib import Path
from typing import Iterator, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
ADDON = HERE / "tessera_blender"
CLIENT = REPO / "scheduler" / "cli" / "python" / "tessera_client"
_SKIP = {"__pycache__"}


def files() -> Iterator[Tuple[Path, str]]:
    """(source, path inside the add-on's zip) for every file of the add-on, in order."""
    for root, prefix in ((ADDON, "tessera_blender"), (CLIENT, "tessera_blender/tessera_client")):
        for path in sorted(root.rglob("*")):
            if path.is_file() and not _SKIP.intersection(path.relative_to(root).parts) \
                    and path.suffix != ".pyc":
                yield path, f"{prefix}/{path.relative_to(root).as_posix()}"


def build_zip(out: Path) -> None:
    """The installable zip; the same sources give the same bytes."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".part")
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as z:
        for source, name in files():
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, source.read_bytes())
    partial.replace(out)


def build_dir(out: Path) -> None:
    """The add-on as a folder, out/tessera_blender (replaced)."""
    target = out / "tessera_blender"
    shutil.rmtree(target, ignore_errors=True)
    for source, name in files():
        dest = out / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)


def main(argv: "list[str]") -> int:
    """The command line: --zip and/or --dir."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--zip", type=Path, help="write the installable zip here")
    parser.add_argument("--dir", type=Path, help="write the add-on folder under this folder")
    args = parser.parse_args(argv)
    if not args.zip and not args.dir:
        parser.error("give --zip and/or --dir")
    if args.zip:
        build_zip(args.zip)
    if args.dir:
        build_dir(args.dir)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
