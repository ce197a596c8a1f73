"""The scheduler's live event stream (``GET /api/v1/events``, server-sent events), followed
across drops: a cut stream is opened again from the last event seen (``Last-Event-ID``), so
nothing in between is lost (the scheduler keeps the last 20,000; older ones come back as one
``missed`` event)."""

from __future__ import annotations

import http.client
import json
import socket
import threading
from typing import Callable, Iterator, Optional

from .errors import ApiError, TesseraError, UnreachableError
from .models import Event
from .transport import Transport

__all__ = ["EventStream", "JobWatch"]

# The stream sends a keep-alive comment every 15 s: a read silent for longer is a dead link.
_READ_TIMEOUT_S = 20.0
_MAX_LINE = 1 << 20


class EventStream:
    """Iterates the farm's events, reconnecting when the stream drops.

    ``for event in EventStream(transport): ...`` blocks for each event. Iteration ends only when
    :meth:`close` is called (from another thread) or the scheduler refuses the stream (its
    ApiError is raised). ``reconnects`` counts the times the stream was opened again.
    """

    def __init__(self, transport: Transport, since: Optional[int] = None,
                 reconnect_delay: float = 1.0,
                 on_connect: Optional[Callable[[bool], None]] = None) -> None:
        self._transport = transport
        self.last_seq = since
        self.reconnects = 0
        self._delay = reconnect_delay
        self._on_connect = on_connect
        self._closed = threading.Event()
        self._lock = threading.Lock()
        self._response: Optional[http.client.HTTPResponse] = None

    def close(self) -> None:
        """Ends the iteration (a blocked read returns at once)."""
        self._closed.set()
        with self._lock:
            response = self._response
        if response is not None:
            _shut(response)

    def __enter__(self) -> "EventStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[Event]:
        first = True
        while not self._closed.is_set():
            if not first:
                self.reconnects += 1
                if self._closed.wait(self._delay):
                    return
            first = False
            headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
            path = "/api/v1/events"
            if self.last_seq is not None:
                path += f"?since={self.last_seq}"
            try:
                response = self._transport.open("GET", path, headers=headers,
                                                timeout=_READ_TIMEOUT_S)
            except UnreachableError:
                self._connected(False)
                continue
            except ApiError as e:
                if e.status in (503, 507):  # too many streams, read-only: try again later
                    self._connected(False)
                    continue
                raise
            with self._lock:
                self._response = response
            self._connected(True)
            try:
                yield from self._read(response)
            except (OSError, http.client.HTTPException, ValueError):
                pass  # the stream dropped: open it again from last_seq
            finally:
                with self._lock:
                    self._response = None
                response.close()
                self._connected(False)

    def _connected(self, live: bool) -> None:
        if self._on_connect is not None:
            self._on_connect(live)

    def _read(self, response: http.client.HTTPResponse) -> Iterator[Event]:
        kind, data, seq = "", [], None
        while not self._closed.is_set():
            raw = response.readline(_MAX_LINE)
            if not raw:
                return  # the server closed the stream
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "event":
                    kind = value
                elif name == "data":
                    data.append(value)
                elif name == "id" and value.isdigit():
                    seq = int(value)
                continue
            if kind:  # a blank line ends an event; a comment alone is a keep-alive
                try:
                    payload = json.loads("\n".join(data)) if data else {}
                except ValueError:
                    payload = {}
                if seq is not None:
                    self.last_seq = seq
                yield Event(seq or 0, kind, payload if isinstance(payload, dict) else {})
            kind, data, seq = "", [], None


def _shut(response: http.client.HTTPResponse) -> None:
    """Unblocks a read on the response's socket from another thread."""
    sock = getattr(getattr(getattr(response, "fp", None), "raw", None), "_sock", None)
    if isinstance(sock, socket.socket):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class JobWatch:
    """Follows the event stream on a thread of its own and wakes a waiter when one job (or one
    of its steps) changes, when events were missed, or when the stream drops or comes back."""

    def __init__(self, transport: Transport, job_id: int) -> None:
        self._job_id = job_id
        self._woken = threading.Event()
        self.live = False
        self.error: Optional[TesseraError] = None
        self.stream = EventStream(transport, on_connect=self._on_connect)
        self._thread = threading.Thread(target=self._run, name=f"tessera-watch-{job_id}",
                                        daemon=True)
        self._thread.start()

    def _on_connect(self, live: bool) -> None:
        self.live = live
        self._woken.set()  # whatever happened meanwhile is unknown: look once

    def _run(self) -> None:
        try:
            for event in self.stream:
                data = event.data
                if (event.kind == "missed" or data.get("job_id") == self._job_id
                        or data.get("pipeline_id") == self._job_id):
                    self._woken.set()
        except TesseraError as e:
            self.error = e
            self.live = False
            self._woken.set()

    def wait(self, timeout: float) -> bool:
        """Waits until woken or `timeout` seconds pass; returns whether it was woken."""
        woken = self._woken.wait(max(0.0, timeout))
        self._woken.clear()
        return woken

    def close(self) -> None:
        """Stops following the stream."""
        self.stream.close()
        self._thread.join(timeout=5)

