"""Where the client finds its farm: the same rules as the ``tessera`` CLI.

Each of server, token and CA file comes from the first of: the argument; the environment
(``TESSERA_SERVER``; ``TESSERA_TOKEN``, else ``TESSERA_TOKEN_FILE``; ``TESSERA_CA_FILE``); the
config file (``$TESSERA_CONFIG``, else ``$XDG_CONFIG_HOME/tessera/config.yaml``, else
``~/.config/tessera/config.yaml``, keys ``server``, ``token``, ``token_file``, ``ca_file``, paths
relative to the file); the default server ``http://127.0.0.1:8470``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Mapping, Optional

from .errors import InvalidInputError

__all__ = ["DEFAULT_SERVER", "Connection", "resolve_connection", "read_yaml", "have_yaml",
           "config_path"]

DEFAULT_SERVER = "http://127.0.0.1:8470"
_CONFIG_KEYS = ("server", "token", "token_file", "ca_file")


@dataclass(frozen=True)
class Connection:
    """How to reach one farm. ``token`` and ``ca_file`` are "" when none is used."""

    server: str
    token: str = ""
    ca_file: str = ""

    def __repr__(self) -> str:  # never print a token
        shown = "..." if self.token else ""
        return f"Connection(server={self.server!r}, token={shown!r}, ca_file={self.ca_file!r})"


def have_yaml() -> bool:
    """Whether PyYAML is importable (YAML job files need it; JSON ones do not)."""
    try:
        import yaml  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def read_yaml(text: str, what: str) -> object:
    """Parses YAML with PyYAML when it is installed; JSON (a subset of YAML) always works.

    Raises InvalidInputError naming ``what`` when the text cannot be read.
    """
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        try:
            return json.loads(text)
        except ValueError:
            raise InvalidInputError(
                f"{what}: reading YAML needs PyYAML (python3-yaml), which this Python lacks; "
                "give the job as a dict or as JSON") from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise InvalidInputError(f"{what}: not valid YAML: {e}") from None


def _read_flat_map(text: str, what: str) -> Dict[str, str]:
    """Reads ``key: value`` lines (comments, quotes); the config file needs no more than that,
    so a DCC's Python without PyYAML still finds the farm."""
    values: Dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#") or line == "---":
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip() or raw[:1].isspace():
            raise InvalidInputError(f"{what}: line {number}: expected 'key: value'")
        value = value.strip()
        if value[:1] in ("'", '"'):
            quote = value[0]
            end = value.find(quote, 1)
            if end < 0:
                raise InvalidInputError(f"{what}: line {number}: unterminated quote")
            value = value[1:end]
        else:
            value = value.split(" #", 1)[0].strip()
        values[key.strip()] = value
    return values


def config_path(environ: Optional[Mapping[str, str]] = None) -> Optional[Path]:
    """The config file the rules above pick (it may not exist), or None without a home."""
    env = os.environ if environ is None else environ
    if env.get("TESSERA_CONFIG"):
        return Path(env["TESSERA_CONFIG"])
    if env.get("XDG_CONFIG_HOME"):
        return Path(env["XDG_CONFIG_HOME"]) / "tessera" / "config.yaml"
    if env.get("HOME"):
        return Path(env["HOME"]) / ".config" / "tessera" / "config.yaml"
    return None


def _read_token_file(path: Path, what: str) -> str:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise InvalidInputError(f"{what}: cannot read {path}") from None
    token = text.split("\n", 1)[0].strip()
    if not token:
        raise InvalidInputError(f"{what}: {path} is empty")
    return token


def _read_config(path: Path) -> Dict[str, str]:
    what = f"config {path}"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise InvalidInputError(f"{what}: cannot read it") from None
    root = read_yaml(text, what) if have_yaml() else _read_flat_map(text, what)
    if root is None:
        return {}
    if not isinstance(root, dict):
        raise InvalidInputError(f"{what}: expected a map (server, token, token_file, ca_file)")
    values: Dict[str, str] = {}
    for key, value in root.items():
        if key not in _CONFIG_KEYS:
            raise InvalidInputError(f"{what}: {key}: unknown key (server, token, token_file, "
                                    "ca_file)")
        if isinstance(value, (dict, list)) or value is None:
            raise InvalidInputError(f"{what}: {key}: expected text")
        values[key] = str(value)
    return values


def resolve_connection(server: Optional[str] = None, token: Optional[str] = None,
                       ca_file: Optional[str] = None, token_file: Optional[str] = None,
                       environ: Optional[Mapping[str, str]] = None) -> Connection:
    """Fills what the arguments leave out from the environment, the config file and defaults.

    Raises InvalidInputError naming the file and key for an unreadable or malformed config or
    token file.
    """
    env = os.environ if environ is None else environ
    server = server or env.get("TESSERA_SERVER", "")
    if not token and token_file:
        token = _read_token_file(Path(token_file), "token_file")
    token = token or env.get("TESSERA_TOKEN", "")
    if not token and env.get("TESSERA_TOKEN_FILE"):
        token = _read_token_file(Path(env["TESSERA_TOKEN_FILE"]), "TESSERA_TOKEN_FILE")
    ca_file = ca_file or env.get("TESSERA_CA_FILE", "")

    path = config_path(env)
    if path is not None and (env.get("TESSERA_CONFIG") or path.exists()):
        values = _read_config(path)

        def beside(p: str) -> str:
            return p if os.path.isabs(p) else str(path.parent / p)

        server = server or values.get("server", "")
        token = token or values.get("token", "")
        if not token and values.get("token_file"):
            token = _read_token_file(Path(beside(values["token_file"])),
                                     f"config {path}: token_file")
        if not ca_file and values.get("ca_file"):
            ca_file = beside(values["ca_file"])
    return Connection(server=(server or DEFAULT_SERVER).rstrip("/"), token=token or "",
                      ca_file=ca_file or "")
