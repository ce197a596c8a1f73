"""Fixtures shared by the Python client and Blender add-on tests (helpers in farm.py)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterator

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from farm import LocalFarm  # noqa: E402


@pytest.fixture(scope="module")
def farm() -> Iterator[LocalFarm]:
    """A scheduler with tokens and two CPU workers: w1 (pool "main", may run `sleep`) and w2."""
    farm = LocalFarm("client")
    try:
        farm.start_scheduler()
        farm.start_worker("w1", "--pool", "main", "--command-program", "sleep")
        farm.start_worker("w2")
        farm.wait_for_workers(2)
        yield farm
    finally:
        farm.stop()


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No TESSERA_* variable or config file of the person running the tests leaks in."""
    for name in ("TESSERA_SERVER", "TESSERA_TOKEN", "TESSERA_TOKEN_FILE", "TESSERA_CA_FILE",
                 "TESSERA_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
