"""A hostile server cannot make the client write outside the folder it fetches into, nor take
its token elsewhere, nor hold it forever: a small HTTP stub on 127.0.0.1 answers the outputs API
with names that climb out (``..``), absolute paths, names through links, too many bytes and
wrong hashes, redirects elsewhere, or never answers."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest

from tessera_client import ApiError, Client, TransferError, UnreachableError, UnsafePathError


class Stub:
    """Serves `listing` as job 1's outputs and `files` (name -> bytes) as the files."""

    def __init__(self) -> None:
        self.listing: dict = {"job_id": 1, "files": []}
        self.files: Dict[str, bytes] = {}
        self.redirect_to = ""
        self.seen: List[Tuple[str, str]] = []  # (path, Authorization)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                stub.seen.append((self.path, self.headers.get("Authorization", "")))
                if stub.redirect_to:
                    self.send_response(302)
                    self.send_header("Location", stub.redirect_to + self.path)
                    self.end_headers()
                    return
                prefix = "/api/v1/jobs/1/outputs"
                if self.path.split("?")[0] == prefix:
                    self.reply(200, json.dumps(stub.listing).encode(), "application/json")
                elif self.path.startswith(prefix + "/"):
                    name = self.path[len(prefix) + 1:]
                    self.reply(200, stub.files.get(name, b""), "application/octet-stream")
                else:
                    self.reply(404, b'{"error": "no such route", "code": "not_found"}',
                               "application/json")

            def reply(self, status: int, body: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub() -> Iterator[Stub]:
    server = Stub()
    yield server
    server.close()


def listed(name: str, data: bytes, **extra: object) -> dict:
    return {"frame": 1, "name": name, "format": "png", "size": len(data), **extra}


def everything_under(folder: Path) -> List[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize("name", [
    "../escape.png", "../../tmp/escape.png", "/tmp/absolute.png", "ok/../../escape.png",
    "./a.png", "a//b.png", "-rf.png", "a\\..\\b.png", "%2e%2e/escape.png", "",
])
def test_names_that_leave_the_folder_are_refused_and_nothing_is_written(
        stub: Stub, tmp_path: Path, name: str) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = outside / "dest"
    stub.listing["files"] = [listed("fine.png", b"fine"), listed(name, b"evil")]
    stub.files = {"fine.png": b"fine", name: b"evil"}
    with pytest.raises(UnsafePathError):
        Client(server=stub.url, token="tsra-t").fetch(1, dest)
    assert everything_under(outside) == ["dest"]  # not even the good file: the listing lied
    assert not Path("/tmp/absolute.png").exists() or name != "/tmp/absolute.png"


def test_links_in_the_destination_are_never_followed(stub: Stub, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    dest = tmp_path / "dest"
    dest.mkdir()
    os.symlink(outside, dest / "sub")  # a folder link planted in the destination
    stub.listing["files"] = [listed("sub/frame.png", b"evil")]
    stub.files = {"sub/frame.png": b"evil"}
    client = Client(server=stub.url, token="tsra-t")
    with pytest.raises(UnsafePathError, match="link"):
        client.fetch(1, dest)
    assert everything_under(outside) == []

    target = outside / "victim.png"
    target.write_bytes(b"precious")
    os.symlink(target, dest / "frame.png")  # a file link: the fetch would write through it
    stub.listing["files"] = [listed("frame.png", b"evil")]
    stub.files = {"frame.png": b"evil"}
    with pytest.raises(UnsafePathError, match="not a plain file"):
        client.fetch(1, dest)
    os.symlink(target, dest / "frame2.png.part")
    stub.listing["files"] = [listed("frame2.png", b"evil")]
    with pytest.raises(UnsafePathError):
        client.fetch(1, dest)
    assert target.read_bytes() == b"precious"


def test_a_step_name_cannot_leave_the_folder(stub: Stub, tmp_path: Path) -> None:
    client = Client(server=stub.url, token="tsra-t")
    for step in ({"step": "..", "job_id": 2}, {"step": "a/b", "job_id": 2},
                 {"step": "loop", "job_id": 1}):
        stub.listing = {"job_id": 1, "files": [listed("ok/fine.png", b"fine")],
                        "steps": [{**step, "output_dir": "/"}]}
        stub.files = {"ok/fine.png": b"fine"}
        with pytest.raises(UnsafePathError):
            client.fetch(1, tmp_path / "dest")
        assert everything_under(tmp_path) == ["dest"], step


def test_one_bad_name_among_good_ones_writes_nothing(stub: Stub, tmp_path: Path) -> None:
    stub.listing["files"] = [listed("sub/a.png", b"a"), listed("sub/../../x.png", b"x")]
    stub.files = {"sub/a.png": b"a"}
    with pytest.raises(UnsafePathError):
        Client(server=stub.url, token="tsra-t").fetch(1, tmp_path / "dest")
    assert everything_under(tmp_path) == ["dest"]


def test_more_bytes_than_listed_or_a_wrong_hash_are_discarded(stub: Stub, tmp_path: Path
                                                              ) -> None:
    dest = tmp_path / "dest"
    client = Client(server=stub.url, token="tsra-t")
    stub.listing["files"] = [{"name": "big.exr", "size": 4}]
    stub.files = {"big.exr": b"x" * (4 << 20)}
    with pytest.raises(TransferError, match="more than the 4 bytes"):
        client.fetch(1, dest)
    assert everything_under(dest) == []
    stub.listing["files"] = [{"name": "a.exr", "size": 3, "sha256": "0" * 64}]
    stub.files = {"a.exr": b"abc"}
    with pytest.raises(TransferError, match="SHA-256"):
        client.fetch(1, dest)
    assert everything_under(dest) == []
    stub.listing["files"] = [{"name": "short.exr", "size": 10}]
    stub.files = {"short.exr": b"abc"}
    with pytest.raises(TransferError, match="3 of the 10 bytes"):
        client.fetch(1, dest)
    assert not (dest / "short.exr").exists()


def test_a_redirect_does_not_carry_the_token_elsewhere(tmp_path: Path) -> None:
    first, second = Stub(), Stub()
    try:
        first.redirect_to = second.url
        with pytest.raises(ApiError) as e:
            Client(server=first.url, token="tsra-secret").outputs(1)
        assert e.value.status == 302
        assert second.seen == [] and first.seen[0][1] == "Bearer tsra-secret"
    finally:
        first.close()
        second.close()


def test_a_server_without_api_v1_is_named_as_such(stub: Stub) -> None:
    problem = Client(server=stub.url, token="tsra-t").check_api_version()
    assert problem is not None and "disagree on the API version" in problem


def test_a_server_that_never_answers_times_out() -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        started = time.monotonic()
        with pytest.raises(UnreachableError, match="timed out"):
            Client(server=f"http://127.0.0.1:{silent.getsockname()[1]}", token="tsra-t",
                   timeout=1).whoami()
        assert time.monotonic() - started < 5
