"""The Blender add-on's build: a zip (the same bytes from the same sources) and a folder, both
with bl_info, the extension manifest and a copy of the Python client inside."""

from __future__ import annotations

import ast
import subprocess
import sys
import zipfile
from pathlib import Path

from farm import CLIENT_DIR, REPO

BUILD = REPO / "plugins" / "blender" / "addon" / "build_addon.py"


def test_the_zip_and_the_folder_carry_the_client(tmp_path: Path) -> None:
    for out in ("a.zip", "b.zip"):
        subprocess.run([sys.executable, str(BUILD), "--zip", str(tmp_path / out), "--dir",
                        str(tmp_path / "folder")], check=True, timeout=60)
    assert (tmp_path / "a.zip").read_bytes() == (tmp_path / "b.zip").read_bytes()
    names = zipfile.ZipFile(tmp_path / "a.zip").namelist()
    assert "tessera_blender/__init__.py" in names
    assert "tessera_blender/blender_manifest.toml" in names
    for source in sorted((CLIENT_DIR / "tessera_client").glob("*.py")):
        assert f"tessera_blender/tessera_client/{source.name}" in names
        copied = tmp_path / "folder" / "tessera_blender" / "tessera_client" / source.name
        assert copied.read_bytes() == source.read_bytes()
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]

    init = ast.parse((tmp_path / "folder" / "tessera_blender" / "__init__.py").read_text())
    bl_info = next(ast.literal_eval(node.value) for node in init.body
                   if isinstance(node, ast.Assign) and node.targets[0].id == "bl_info")
    assert bl_info["blender"] == (3, 4, 0) and bl_info["category"] == "Render"


def test_the_addon_is_python_39_syntax() -> None:
    for source in sorted((BUILD.parent / "tessera_blender").glob("*.py")):
        ast.parse(source.read_text(), str(source), feature_version=(3, 9))
