"""Test support for the Python client and the Blender add-on: a real tessera-scheduler and real
tessera-workers on loopback (127.0.0.1 only), started from TESSERA_BIN_DIR (ctest sets it to
the build's bin/; by hand: TESSERA_BIN_DIR=build/bin pytest tests/python) and stopped by their
own process ids. A missing tool skips a test with the reason, and fails it under CI=true."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
CLIENT_DIR = REPO / "scheduler" / "cli" / "python"
if str(CLIENT_DIR) not in sys.path:
    sys.path.insert(0, str(CLIENT_DIR))


def under_ci() -> bool:
    """Whether CI=true: a missing tool is then a failure, not a skip."""
    return os.environ.get("CI", "").lower() in ("true", "1", "yes")


def require(condition: bool, reason: str) -> None:
    """Skips the test for `reason` unless `condition` holds (fails it under CI)."""
    if condition:
        return
    if under_ci():
        pytest.fail(f"required under CI: {reason}")
    pytest.skip(reason)


def bin_dir() -> Path:
    """Where the built binaries are: TESSERA_BIN_DIR, else the repository's build/bin."""
    return Path(os.environ.get("TESSERA_BIN_DIR") or REPO / "build" / "bin")


def binary(name: str) -> str:
    """The path of a built binary; skips the test (fails under CI) when it is not built."""
    path = bin_dir() / name
    require(os.access(path, os.X_OK), f"{path} is not built (set TESSERA_BIN_DIR)")
    return str(path)


def wait_for(condition: Callable[[], bool], timeout: float, interval: float = 0.1) -> bool:
    """Polls `condition` until it holds or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval)
    return condition()


class Process:
    """A child process with its output in a log file, stopped by its pid."""

    def __init__(self, argv: List[str], log: Path, env: Optional[Dict[str, str]] = None) -> None:
        self.log = log
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, env=env)

    @property
    def running(self) -> bool:
        return self.popen.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL after `timeout` seconds."""
        if self.popen.poll() is not None:
            return
        os.kill(self.popen.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.kill(self.popen.pid, signal.SIGKILL)
            self.popen.wait(5)


class LocalFarm:
    """A scheduler with API tokens on (the default) and workers, in a temporary folder."""

    def __init__(self, name: str, config: str = "", security: str = "insecure") -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"tessera-py-{name}-"))
        (self.dir / "scheduler.yaml").write_text(
            f"broker:\n  security: {security}\n  heartbeat_ms: 500\n  liveness: 6\n" + config)
        self.scheduler: Optional[Process] = None
        self.workers: Dict[str, Process] = {}
        self.api_url = ""
        self.broker = ""
        self.token = ""

    def start_scheduler(self) -> None:
        info = self.dir / "data" / "scheduler.json"
        self.scheduler = Process(
            [binary("tessera-scheduler"), "--config", str(self.dir / "scheduler.yaml"),
             "--data", str(self.dir / "data"), "--api", "127.0.0.1:0", "--broker",
             "tcp://127.0.0.1:0", "--log-level", "info"], self.dir / "scheduler.log")
        ready = wait_for(lambda: info.exists() or not self.scheduler.running, 20)
        assert ready and self.scheduler.running, self.log()
        parsed = json.loads(info.read_text())
        self.api_url = parsed["api_url"]
        self.broker = parsed["broker_endpoint"]
        token_file = self.dir / "data" / "admin.token"
        if token_file.exists():
            self.token = token_file.read_text().strip()

    def start_worker(self, name: str, *extra: str, env: Optional[Dict[str, str]] = None) -> None:
        argv = [binary("tessera-worker"), "--scheduler", self.broker, "--name", name,
                "--backend", "cpu", "--data-dir", str(self.dir / name), "--log-level", "info",
                *extra]
        if "--threads" not in extra:
            argv += ["--threads", "1"]
        self.workers[name] = Process(argv, self.dir / f"worker-{name}.log",
                                     env={**os.environ, **(env or {})})

    def client(self, **kwargs):  # type: ignore[no-untyped-def]
        """A tessera_client.Client for this farm (the admin token unless one is given)."""
        from tessera_client import Client
        kwargs.setdefault("token", self.token)
        return Client(server=kwargs.pop("server", self.api_url), **kwargs)

    def wait_for_workers(self, count: int, timeout: float = 30) -> None:
        client = self.client()
        ok = wait_for(lambda: sum(w.state != "offline" for w in client.workers()) >= count,
                      timeout, 0.2)
        assert ok, self.log()

    def log(self) -> str:
        path = self.dir / "scheduler.log"
        return path.read_text(errors="replace")[-6000:] if path.exists() else ""

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.stop()
        if self.scheduler is not None:
            self.scheduler.stop()
        if not os.environ.get("TESSERA_KEEP_TEST_DATA"):
            shutil.rmtree(self.dir, ignore_errors=True)


def make_certificate(folder: Path) -> Optional[tuple]:
    """A self-signed certificate for 127.0.0.1 (cert, key), or None without openssl."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    cert, key = folder / "api.crt", folder / "api.key"
    done = subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
         "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key),
         "-out", str(cert)], capture_output=True, timeout=60)
    return (cert, key) if done.returncode == 0 and cert.exists() else None


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on (bound once, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CuttingProxy:
    """A TCP proxy on 127.0.0.1 in front of the scheduler that can cut every connection it
    carries (the event stream among them), as a network hiccup would."""

    def __init__(self, target_url: str) -> None:
        host_port = target_url.split("://", 1)[1]
        host, port = host_port.rsplit(":", 1)
        self._target = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        self._lock = threading.Lock()
        self._open: List[socket.socket] = []
        self.requests: List[str] = []  # the first line of each request seen
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self._target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(upstream, client, False),
                             daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, from_client: bool) -> None:
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                if from_client and (data.startswith(b"GET ") or data.startswith(b"POST ")):
                    with self._lock:
                        self.requests.append(data.split(b"\r\n", 1)[0].decode("latin-1"))
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def stream_requests(self) -> List[str]:
        """The event-stream requests seen so far."""
        with self._lock:
            return [r for r in self.requests if "/api/v1/events" in r]

    def cut(self) -> None:
        """Cuts every connection open now (new ones are carried again)."""
        with self._lock:
            doomed, self._open = self._open, []
        for s in doomed:
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass

    def close(self) -> None:
        self._listener.close()
        self.cut()
