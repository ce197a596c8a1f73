"""The client's waits across a cut event stream, and TLS with the scheduler's certificate."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from farm import CuttingProxy, LocalFarm, make_certificate, require, wait_for
from tessera_client import Client, UnreachableError, resolve_connection


def sleeper(name: str, frames: str, seconds: int) -> dict:
    return {"name": name, "renderer": "command", "frames": frames, "pools": ["main"],
            "settings": {"program": "sleep", "argv": [str(seconds)]}}


def test_wait_follows_the_event_stream_across_cuts(farm) -> None:
    proxy = CuttingProxy(farm.api_url)
    try:
        client = farm.client(server=proxy.url)
        job = client.submit(sleeper("cut", "1-4", 1)).job
        cuts = [threading.Timer(1.5, proxy.cut), threading.Timer(3.0, proxy.cut)]
        for timer in cuts:
            timer.start()
        seen = []
        done = client.wait(job.id, timeout=90, progress=seen.append)
        assert done.succeeded, done.error
        assert seen[-1].tasks.done == 4
        streams = proxy.stream_requests()
        assert len(streams) >= 2, streams
        # Opened again after the cut from the last event it had, so none is lost.
        assert any("since=" in line for line in streams[1:]), streams
    finally:
        proxy.close()


def test_events_continue_in_order_after_a_cut(farm) -> None:
    proxy = CuttingProxy(farm.api_url)
    client = farm.client(server=proxy.url)
    events = []
    stream = client.events()

    def follow() -> None:
        for event in stream:
            events.append(event)

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    try:
        assert wait_for(lambda: len(proxy.stream_requests()) == 1, 10)
        first = client.submit({"name": "before-cut", "renderer": "noop", "frames": "1"}).job
        assert wait_for(lambda: any(e.job_id == first.id for e in events), 10)
        proxy.cut()
        second = client.submit({"name": "after-cut", "renderer": "noop", "frames": "1"}).job
        assert wait_for(lambda: any(e.job_id == second.id for e in events), 15), events
        assert stream.reconnects >= 1
        seqs = [e.seq for e in events if e.seq]
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    finally:
        stream.close()
        reader.join(5)
        proxy.close()


def test_tls_with_the_schedulers_certificate(tmp_path: Path, monkeypatch) -> None:
    made = make_certificate(tmp_path)
    require(made is not None, "openssl cannot make a test certificate (apt-get install openssl)")
    cert, key = made
    farm = LocalFarm("tls", config=f"api:\n  tls_cert_file: {cert}\n  tls_key_file: {key}\n")
    try:
        farm.start_scheduler()
        assert farm.api_url.startswith("https://127.0.0.1:")
        trusted = farm.client(ca_file=str(cert))
        assert trusted.whoami().role == "admin"
        job = trusted.submit({"name": "tls", "renderer": "noop", "frames": "1-2"}).job
        farm.start_worker("w1")
        assert trusted.wait(job.id, timeout=60).succeeded
        with pytest.raises(UnreachableError) as e:
            farm.client().whoami()  # the system's CAs do not know this certificate
        assert "TLS certificate not trusted" in str(e.value)
        # The CA from the environment, as the CLI takes it.
        monkeypatch.setenv("TESSERA_CA_FILE", str(cert))
        monkeypatch.setenv("TESSERA_SERVER", farm.api_url)
        monkeypatch.setenv("TESSERA_TOKEN", farm.token)
        assert resolve_connection().ca_file == str(cert)
        assert Client().summary().workers["total"] == 1
    finally:
        farm.stop()
