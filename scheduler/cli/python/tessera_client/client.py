"""The Tessera client: every call of the scheduler's HTTP API v1 (docs/openapi.yaml) as a
method with typed results, raising the errors of :mod:`tessera_client.errors`."""

from __future__ import annotations

import getpass
import os
import re
import secrets
import threading
import time
import urllib.parse
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

from .config import Connection, resolve_connection
from .errors import (CancelledError, InvalidInputError, TesseraError, UnreachableError,
                     UnsafePathError)
from .events import EventStream, JobWatch
from .fetch import (FetchProgress, check_name, download_output, is_whole, safe_folder,
                    safe_target)
from .models import (ApiToken, Costs, DryRun, FetchResult, Frame, Job, JoinToken,
                     NewApiToken, NewJoinToken, OutputFile, Plugins, Submission, Summary, Task,
                     TaskLog, UploadedAsset, WhoAmI, Why, Worker, WorkerAction)
from .submit import JobInput, SubmitProgress, hash_file, prepare_job, upload_blob
from .transport import Transport

__all__ = ["Client", "API_VERSION", "WaitTimeoutError"]

# The API this client speaks: the /api/v1 paths.
API_VERSION = "1"
_SUBMIT_RETRIES = 3
# A scheduler restart (or a hiccup) does not end a long wait; only a sustained outage does.
_UNREACHABLE_GRACE_S = 10.0
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]")


class WaitTimeoutError(TesseraError):
    """wait() gave up after its timeout; ``job`` is the job as last seen."""

    def __init__(self, message: str, job: Optional[Job]) -> None:
        super().__init__(message)
        self.job = job


def _id(value: Any, what: str = "id") -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{what}: expected a positive integer, got {value!r}")
    return value


def _query(**params: Any) -> str:
    kept = {k: ("true" if v is True else "false" if v is False else v)
            for k, v in params.items() if v is not None}
    return "?" + urllib.parse.urlencode(kept) if kept else ""


class Client:
    """A connection to one Tessera farm.

    Args:
        server: the API URL (``http://host:8470``); default from TESSERA_SERVER, the config
            file, else ``http://127.0.0.1:8470``.
        token: the API token (``tsra-...``); default from TESSERA_TOKEN / TESSERA_TOKEN_FILE or
            the config file.
        ca_file: PEM certificates to trust for ``https://``; default TESSERA_CA_FILE, the config
            file, else the system's.
        token_file: a file whose first line is the token (instead of `token`).
        timeout: seconds any one request may take (connect and each read).
    """

    def __init__(self, server: Optional[str] = None, token: Optional[str] = None,
                 ca_file: Optional[str] = None, token_file: Optional[str] = None,
                 timeout: float = 60.0) -> None:
        self.connection: Connection = resolve_connection(server, token, ca_file, token_file)
        self._http = Transport(self.connection, timeout)

    @property
    def server(self) -> str:
        """The API URL this client talks to."""
        return self._http.server

    def dashboard_url(self, job_id: Optional[int] = None) -> str:
        """The dashboard's address (a job's page when `job_id` is given)."""
        return f"{self.server}/#/jobs/{job_id}" if job_id else f"{self.server}/"

    def _get(self, path: str) -> dict:
        return self._http.call("GET", path)

    def _post(self, path: str, payload: Any = None, headers: Optional[Dict[str, str]] = None
              ) -> dict:
        return self._http.call("POST", path, payload if payload is not None else {}, headers)

    # ---- the farm ------------------------------------------------------------------------------

    def health(self) -> Dict[str, Any]:
        """``GET /healthz``: ``{"status": "ok"}`` or ``"degraded"`` with a reason (no token)."""
        return self._get("/healthz")

    def whoami(self) -> WhoAmI:
        """The token's user and role."""
        return WhoAmI.from_json(self._get("/api/v1/whoami"))

    def summary(self) -> Summary:
        """Jobs, tasks and workers by state, cost today and per hour, alerts, the version."""
        return Summary.from_json(self._get("/api/v1/summary"))

    def costs(self, days: Optional[int] = None) -> Costs:
        """What the farm cost per UTC day over the last `days` (default 30)."""
        return Costs.from_json(self._get("/api/v1/costs" + _query(days=days)))

    def history(self) -> Dict[str, Any]:
        """The farm's queue, throughput and workers over the last day (raw JSON)."""
        return self._get("/api/v1/history")

    def autoscaler(self) -> Dict[str, Any]:
        """Node groups, nodes, forecasts and the latest decisions (raw JSON)."""
        return self._get("/api/v1/autoscaler")

    def openjd_environments(self) -> Dict[str, Any]:
        """The farm's Open Job Description queue environments (each with its pools and template
        text) and path mapping rules, as a submitter running a job bundle locally needs them
        (raw JSON: ``environments`` and ``path_mapping``)."""
        return self._get("/api/v1/openjd/environments")

    def metrics(self) -> str:
        """``GET /metrics``: the Prometheus text."""
        return self._http.send("GET", "/metrics").body.decode("utf-8", "replace")

    def plugins(self) -> Plugins:
        """The renderers the farm knows (with their settings) and which worker offers which."""
        return Plugins.from_json(self._get("/api/v1/plugins"))

    def check_api_version(self) -> Optional[str]:
        """None when the farm speaks this client's API (v1); otherwise why not, in words."""
        try:
            self._get("/api/v1/whoami")
        except TesseraError as e:
            status = getattr(e, "status", None)
            if status == 404:
                return (f"the farm at {self.server} does not serve API v{API_VERSION} "
                        "(/api/v1); this client and the farm disagree on the API version")
            if status is None:
                raise
        return None

    # ---- jobs ----------------------------------------------------------------------------------

    def default_user(self) -> str:
        """Whose job a submission is when the job does not say: the token's user on a farm with
        tokens, else the login name (as the CLI does)."""
        if self.connection.token:
            me = self.whoami()
            if me.auth == "token" and me.user:
                return me.user
        try:
            login = getpass.getuser()
        except (KeyError, OSError):
            return ""
        return _NAME_CHARS.sub("_", login)[:128]

    def submit(self, job: JobInput, *, files: Optional[Mapping[str, Any]] = None,
               parameters: Optional[Mapping[str, Any]] = None,
               base_dir: Optional[Union[str, os.PathLike]] = None, user: Optional[str] = None,
               dry_run: bool = False, check: bool = True,
               progress: Optional[Callable[[SubmitProgress], None]] = None,
               cancel: Optional[threading.Event] = None) -> Submission:
        """Submits a job: a dict, or the path of a job file or an OpenJD template.

        The files the job reads (its binary scene, the files a path-tracer scene names, the job's
        ``assets:``, and `files`: asset name -> local path) are hashed and uploaded only when
        the farm lacks them. With `check` the farm's dry run runs first, so a job it refuses
        uploads nothing; with `dry_run` nothing is uploaded or stored and the result has
        ``dry_run`` instead of ``job``. `parameters` are an OpenJD template's values.
        `progress` is called at each stage; setting `cancel` stops before the job is created.
        """
        prepared = prepare_job(job, files=files, parameters=parameters, base_dir=base_dir)
        body = dict(prepared.body)
        user = user if user is not None else self.default_user()
        if user:
            body["user"] = user

        def report(stage: str, **kw: Any) -> None:
            if progress is not None:
                progress(SubmitProgress(stage, **kw))

        assets: List[UploadedAsset] = []
        hashes: Dict[str, str] = {}
        for i, (name, path) in enumerate(sorted(prepared.files.items())):
            report("hashing", done=i, total=len(prepared.files), name=name)
            sha, size = hash_file(path, cancel)
            hashes[name] = sha
            assets.append(UploadedAsset(name, str(path), sha, size, False))
        if hashes:
            body["assets"] = hashes
        if dry_run or check:
            report("checking")
            checked = DryRun.from_json(self._post("/api/v1/jobs?dry_run=true", body).get("job"))
            if dry_run:
                return Submission(dry_run=checked, assets=assets)
        uploaded: Dict[str, bool] = {}
        for i, asset in enumerate(assets):
            if asset.sha256 not in uploaded:
                report("uploading", done=i, total=len(assets), name=asset.name,
                       bytes_total=asset.size)
                uploaded[asset.sha256] = upload_blob(
                    self._http, Path(asset.path), asset.sha256, asset.size, cancel,
                    lambda n, a=asset, i=i: report("uploading", done=i, total=len(assets),
                                                   name=a.name, bytes_done=n,
                                                   bytes_total=a.size))
                asset.uploaded = uploaded[asset.sha256]
        if cancel is not None and cancel.is_set():
            raise CancelledError("cancelled; no job was submitted")
        report("submitting", done=len(assets), total=len(assets))
        created = Job.from_json(self._post_job(body).get("job"))
        report("submitted", done=len(assets), total=len(assets))
        return Submission(job=created, assets=assets)

    def _post_job(self, body: Dict[str, Any]) -> dict:
        # One key per submission: a request re-sent after its answer was lost gets the job the
        # first one created instead of a second job.
        headers = {"Idempotency-Key": secrets.token_hex(16)}
        for attempt in range(_SUBMIT_RETRIES + 1):
            try:
                return self._post("/api/v1/jobs", body, headers)
            except UnreachableError as e:
                if not e.may_have_arrived or attempt == _SUBMIT_RETRIES:
                    raise
                time.sleep(0.5 * (2 ** attempt))
        raise AssertionError("unreachable")

    def jobs(self, state: Optional[str] = None, user: Optional[str] = None,
             project: Optional[str] = None, limit: Optional[int] = None,
             steps: bool = False) -> List[Job]:
        """Jobs, newest first (all pages, or at most `limit`), filtered by state/user/project;
        `steps` lists the steps of jobs with steps too."""
        return list(self.iter_jobs(state, user, project, limit, steps))

    def iter_jobs(self, state: Optional[str] = None, user: Optional[str] = None,
                  project: Optional[str] = None, limit: Optional[int] = None,
                  steps: bool = False) -> Iterator[Job]:
        """Like jobs(), a page at a time."""
        before: Optional[int] = None
        left = limit
        while left is None or left > 0:
            page = self._get("/api/v1/jobs" + _query(
                state=state, user=user, project=project, steps=steps or None, before=before,
                limit=min(left, 1000) if left is not None else 1000))
            for item in page.get("jobs") or []:
                yield Job.from_json(item)
            if left is not None:
                left -= len(page.get("jobs") or [])
            before = page.get("next_before")
            if before is None:
                return

    def job(self, job_id: int) -> Job:
        """One job (with its steps, for a job with steps)."""
        return Job.from_json(self._get(f"/api/v1/jobs/{_id(job_id)}").get("job"))

    def wait(self, job_id: int, timeout: Optional[float] = None,
             progress: Optional[Callable[[Job], None]] = None, poll_interval: float = 0.5,
             recheck: float = 5.0) -> Job:
        """Waits until the job ends and returns it (check ``job.succeeded``).

        Follows the event stream (reconnecting when it drops) and reads the job whenever it
        changes, at least every `recheck` seconds (every `poll_interval` without a stream).
        `progress` is called with the job each time its state or counters change. Raises
        WaitTimeoutError after `timeout` seconds, and UnreachableError only when the scheduler
        stays unreachable for more than 10 s.
        """
        _id(job_id)
        start = time.monotonic()
        watch = JobWatch(self._http, job_id)
        last: Optional[Job] = None
        shown: Any = None
        unreachable_since: Optional[float] = None
        try:
            while True:
                try:
                    last = self.job(job_id)
                except UnreachableError:
                    now = time.monotonic()
                    unreachable_since = unreachable_since or now
                    if last is None or now - unreachable_since > _UNREACHABLE_GRACE_S:
                        raise
                else:
                    unreachable_since = None
                    seen = (last.state, last.progress, last.tasks)
                    if progress is not None and seen != shown:
                        progress(last)
                    shown = seen
                    if last.finished:
                        return last
                pause = recheck if watch.live else poll_interval
                if timeout is not None:
                    left = start + timeout - time.monotonic()
                    if left <= 0:
                        state = f" (still {last.state}, {last.progress:.0%})" if last else ""
                        raise WaitTimeoutError(f"timed out after {timeout:g} s waiting for job "
                                               f"{job_id}{state}", last)
                    pause = min(pause, left)
                watch.wait(pause)
        finally:
            watch.close()

    def events(self, since: Optional[int] = None) -> EventStream:
        """The farm's live events from now (or after event `since`), reconnecting when the
        stream drops: ``with client.events() as stream: for event in stream: ...``."""
        return EventStream(self._http, since)

    def tasks(self, job_id: int, state: Optional[str] = None) -> List[Task]:
        """The job's tasks in index order (every page), optionally only those in `state`."""
        out: List[Task] = []
        after: Optional[int] = None
        while True:
            page = self._get(f"/api/v1/jobs/{_id(job_id)}/tasks" + _query(state=state,
                                                                          after=after))
            out += [Task.from_json(t) for t in page.get("tasks") or []]
            after = page.get("next_after")
            if after is None:
                return out

    def frames(self, job_id: int) -> List[Frame]:
        """Each frame of the job: its state, parts done, thumbnail, flag."""
        out: List[Frame] = []
        first: Optional[int] = None
        while True:
            page = self._get(f"/api/v1/jobs/{_id(job_id)}/frames" + _query(first=first))
            frames = page.get("frames") or []
            out += [Frame.from_json(f) for f in frames]
            end = page.get("frame_end")
            if not frames or not isinstance(end, int) or frames[-1].get("frame", end) >= end:
                return out
            first = frames[-1]["frame"] + 1

    def thumbnail(self, job_id: int, frame: int) -> bytes:
        """A frame's PNG thumbnail (at most 256 px)."""
        return self._http.send("GET", f"/api/v1/jobs/{_id(job_id)}/frames/{int(frame)}/"
                                      "thumbnail").body

    def task_log(self, task_id: int) -> TaskLog:
        """A task's attempts: how each ended, where, why, and its log."""
        return TaskLog.from_json(self._get(f"/api/v1/tasks/{_id(task_id, 'task_id')}/log"))

    def why(self, task_id: int) -> Why:
        """Why a task is (not) running."""
        return Why.from_json(self._get(f"/api/v1/tasks/{_id(task_id, 'task_id')}/why"))

    def _act(self, job_id: int, action: str, payload: Any = None) -> Job:
        reply = self._post(f"/api/v1/jobs/{_id(job_id)}/{action}", payload)
        job = Job.from_json(reply.get("job"))
        if "tasks_requeued" in reply:
            job.raw = dict(job.raw, tasks_requeued=reply["tasks_requeued"])
        return job

    def cancel(self, job_id: int) -> Job:
        """Cancels a job (running tasks are told to stop); ConflictError if it has ended."""
        return self._act(job_id, "cancel")

    def pause(self, job_id: int) -> Job:
        """Holds a job's queued tasks (running ones finish)."""
        return self._act(job_id, "pause")

    def resume(self, job_id: int) -> Job:
        """Releases a paused job."""
        return self._act(job_id, "resume")

    def retry(self, job_id: int) -> Job:
        """Requeues the job's failed tasks with a fresh retry budget
        (``job.raw["tasks_requeued"]`` says how many)."""
        return self._act(job_id, "retry")

    def rerender(self, job_id: int, frames: str) -> Job:
        """Renders finished frames again: `frames` is "A-B" or one frame."""
        return self._act(job_id, "rerender", {"frames": str(frames)})

    def set_priority(self, job_id: int, priority: int) -> Job:
        """Changes a job's priority (0..100, higher first), at once."""
        return self._act(job_id, "priority", {"priority": priority})

    def delete(self, job_id: int) -> int:
        """Deletes a finished job's records (its frames stay on disk); returns its id."""
        return int(self._http.call("DELETE", f"/api/v1/jobs/{_id(job_id)}").get("deleted", 0))

    # ---- outputs -------------------------------------------------------------------------------

    def outputs(self, job_id: int) -> List[OutputFile]:
        """The job's output files, every page: frames and files its tasks returned."""
        return [OutputFile.from_json(f) for f in self._outputs(job_id)[0]
                if not f.get("truncated")]

    def _outputs(self, job_id: int) -> "tuple[List[dict], List[dict]]":
        files: List[dict] = []
        steps: List[dict] = []
        first: Optional[int] = None
        while True:
            page = self._get(f"/api/v1/jobs/{_id(job_id)}/outputs" + _query(first=first))
            files += [f for f in page.get("files") or [] if isinstance(f, dict)]
            steps = page.get("steps") or steps
            first = page.get("next_first")
            if first is None:
                return files, steps

    def fetch(self, job_id: int, directory: Union[str, os.PathLike],
              progress: Optional[Callable[[FetchProgress], None]] = None,
              cancel: Optional[threading.Event] = None) -> FetchResult:
        """Downloads the job's output files into `directory` (created if missing); the frames
        of a job's steps go into a folder per step.

        Resumable: files already there whole are kept, a broken-off download continues. Each
        file is checked against the listed size (and SHA-256 when listed). A name that would
        land outside `directory` (``..``, absolute, through a link) raises UnsafePathError
        before anything is written.
        """
        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        result = FetchResult(directory=str(root))
        self._fetch_into(_id(job_id), root.resolve(), "", result, progress, cancel)
        return result

    def _fetch_into(self, job_id: int, root: Path, prefix: str, result: FetchResult,
                    progress: Optional[Callable[[FetchProgress], None]],
                    cancel: Optional[threading.Event], step_of: Optional[int] = None) -> None:
        raw_files, steps = self._outputs(job_id)
        files = [OutputFile.from_json(f) for f in raw_files if not f.get("truncated")]
        # A step has no steps: a listing that says otherwise is not followed (no loops).
        steps = steps if step_of is None else []
        for f in files:  # every name is checked before anything is written
            check_name(f.name)
        for step in steps:
            check_name(step.get("step"), "step folder")
            if "/" in step["step"] or step.get("job_id") == job_id:
                raise UnsafePathError(f"the server listed a step {step['step']!r} that is not a "
                                      "plain folder name or not another job; nothing is written")
        targets = [safe_target(root, f.name) for f in files]
        for i, (listed, target) in enumerate(zip(files, targets), 1):
            shown = prefix + listed.name
            if is_whole(target, listed):
                result.kept.append(shown)
                continue

            def on_bytes(n: int, name: str = shown, i: int = i, total: int = listed.size
                         ) -> None:
                if progress is not None:
                    progress(FetchProgress(name, i, len(files), n, total))

            result.bytes += download_output(self._http, job_id, listed, target, cancel,
                                            on_bytes)
            result.fetched.append(shown)
        for step in steps:
            self._fetch_into(_id(step.get("job_id")), safe_folder(root, step["step"]),
                             prefix + step["step"] + "/", result, progress, cancel, job_id)

    # ---- workers -------------------------------------------------------------------------------

    def workers(self) -> List[Worker]:
        """Every worker the farm knows, connected or not."""
        return [Worker.from_json(w) for w in self._get("/api/v1/workers").get("workers") or []]

    def worker(self, name: str) -> Worker:
        """One worker by name."""
        return Worker.from_json(self._get("/api/v1/workers/" + _quote(name)).get("worker"))

    def _worker_action(self, name: str, action: str) -> WorkerAction:
        return WorkerAction.from_json(self._post(f"/api/v1/workers/{_quote(name)}/{action}"))

    def drain_worker(self, name: str) -> WorkerAction:
        """The worker finishes its running tasks, takes no new ones, then leaves."""
        return self._worker_action(name, "drain")

    def revoke_worker(self, name: str) -> WorkerAction:
        """Disconnects the worker; its key is refused from now on."""
        return self._worker_action(name, "revoke")

    def readmit_worker(self, name: str) -> WorkerAction:
        """Lets a revoked worker enrol again with a join token."""
        return self._worker_action(name, "readmit")

    def disable_worker(self, name: str) -> WorkerAction:
        """The worker stays connected but gets no new tasks."""
        return self._worker_action(name, "disable")

    def enable_worker(self, name: str) -> WorkerAction:
        """A disabled worker takes tasks again."""
        return self._worker_action(name, "enable")

    # ---- tokens --------------------------------------------------------------------------------

    def create_token(self, user: str, role: str, note: str = "", ttl_s: int = 0) -> NewApiToken:
        """A new API token (admin); its secret is in ``.token``, shown this once."""
        return NewApiToken.from_json(self._post("/api/v1/tokens", {
            "user": user, "role": role, "note": note, "ttl_s": ttl_s}))

    def tokens(self) -> List[ApiToken]:
        """The API tokens (admin), never their secrets."""
        return [ApiToken.from_json(t) for t in self._get("/api/v1/tokens").get("tokens") or []]

    def revoke_token(self, token_id: int) -> ApiToken:
        """Revokes an API token (admin)."""
        reply = self._post(f"/api/v1/tokens/{_id(token_id, 'token_id')}/revoke")
        return ApiToken.from_json(reply.get("api_token"))

    def create_join_token(self, note: str = "", ttl_s: int = 86400, uses: int = 0,
                          worker: str = "") -> NewJoinToken:
        """A worker join token (admin); `uses` 0 is unlimited, `ttl_s` 0 never expires."""
        payload: Dict[str, Any] = {"note": note, "ttl_s": ttl_s, "uses": uses}
        if worker:
            payload["worker"] = worker
        return NewJoinToken.from_json(self._post("/api/v1/join-tokens", payload))

    def join_tokens(self) -> List[JoinToken]:
        """The worker join tokens (admin)."""
        reply = self._get("/api/v1/join-tokens")
        return [JoinToken.from_json(t) for t in reply.get("tokens") or []]

    def revoke_join_token(self, token_id: int) -> JoinToken:
        """Revokes a join token (admin)."""
        reply = self._post(f"/api/v1/join-tokens/{_id(token_id, 'token_id')}/revoke")
        return JoinToken.from_json(reply.get("join_token"))


def _quote(name: str) -> str:
    if not isinstance(name, str) or not name:
        raise InvalidInputError("name: expected a worker name")
    return urllib.parse.quote(name, safe="")
