"""Typed results: one dataclass per shape the API answers with (docs/openapi.yaml).

Each keeps the fields people use, typed, and the whole JSON object in ``raw`` (so a field a
newer scheduler adds is never lost). Timestamps stay ISO 8601 text, as the API sends them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Callable, ClassVar, Dict, List, Optional, Type, TypeVar

__all__ = [
    "WhoAmI", "TaskCounts", "Job", "DryRun", "Task", "TaskAttempt", "TaskLog", "Why", "Frame",
    "Worker", "WorkerAction", "PluginSetting", "Plugin", "WorkerPlugins", "Plugins", "OutputFile",
    "Summary", "CostDay", "Costs", "ApiToken", "NewApiToken", "JoinToken", "NewJoinToken",
    "Event", "UploadedAsset", "Submission", "FetchResult", "TERMINAL_STATES",
]

T = TypeVar("T")

TERMINAL_STATES = ("done", "failed", "canceled")


def _build(cls: Type[T], data: Any, **nested: Any) -> T:
    """An instance of `cls` from a JSON object: the fields it has, `nested` ones converted."""
    data = data if isinstance(data, dict) else {}
    kwargs: Dict[str, Any] = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name == "raw":
            kwargs["raw"] = data
        elif f.name in nested:
            kwargs[f.name] = nested[f.name]
        elif f.name in data and data[f.name] is not None:
            kwargs[f.name] = data[f.name]
    return cls(**kwargs)


def _list_of(convert: Callable[[Any], Any]) -> Callable[[Any], List[Any]]:
    return lambda items: [convert(item) for item in items or []]


class _Result:
    """A result read from the API's JSON; `_nested` converts fields that are results too."""

    _nested: ClassVar[Dict[str, Callable[[Any], Any]]] = {}

    @classmethod
    def from_json(cls: Type[T], data: Any) -> T:
        """Builds the result from the API's JSON object (fields it lacks keep their
        defaults)."""
        data = data if isinstance(data, dict) else {}
        nested = {name: convert(data.get(name)) for name, convert in cls._nested.items()}
        return _build(cls, data, **nested)


@dataclass
class WhoAmI(_Result):
    """The caller as the scheduler sees its token."""

    user: str = ""
    role: str = ""
    token_id: int = 0
    auth: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class TaskCounts(_Result):
    """Tasks by state."""

    total: int = 0
    queued: int = 0
    running: int = 0
    done: int = 0
    failed: int = 0
    canceled: int = 0


@dataclass
class Job(_Result):
    """A job as the scheduler stores it (``state``: queued, running, paused, done, failed,
    canceled)."""

    id: int = 0
    name: str = ""
    state: str = ""
    paused: bool = False
    priority: int = 50
    frame_start: int = 0
    frame_end: int = 0
    chunk_size: int = 1
    renderer: str = ""
    project: str = ""
    user: str = ""
    pools: List[str] = field(default_factory=list)
    tags: List[str] = field(default_factory=list)
    resources: Dict[str, Any] = field(default_factory=dict)
    tasks: TaskCounts = field(default_factory=TaskCounts)
    progress: float = 0.0
    eta_s: Optional[int] = None
    output_dir: str = ""
    output_pattern: str = ""
    output_formats: List[str] = field(default_factory=list)
    submitted_at: str = ""
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    error: Optional[str] = None
    notice: Optional[str] = None
    gpu_seconds: float = 0.0
    cost: float = 0.0
    pipeline_id: Optional[int] = None
    step: Optional[str] = None
    steps: List["Job"] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def finished(self) -> bool:
        """Whether the job has ended (done, failed or canceled)."""
        return self.state in TERMINAL_STATES

    @property
    def succeeded(self) -> bool:
        """Whether the job ended done."""
        return self.state == "done"


Job._nested = {"tasks": TaskCounts.from_json, "steps": _list_of(Job.from_json)}


@dataclass
class DryRun(_Result):
    """What a submission would create; nothing was stored."""

    name: str = ""
    renderer: str = ""
    user: str = ""
    frames: Dict[str, int] = field(default_factory=dict)
    chunk_size: int = 1
    parts_per_frame: int = 1
    tasks: int = 0
    assets: int = 0
    output: Dict[str, Any] = field(default_factory=dict)
    steps: List[Dict[str, Any]] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Task(_Result):
    """One task: a chunk of frames (or a tile / sample part of one)."""

    id: int = 0
    job_id: int = 0
    index: int = 0
    frame_start: int = 0
    frame_end: int = 0
    state: str = ""
    attempt: int = 0
    failures: int = 0
    failures_total: int = 0
    worker_id: Optional[int] = None
    worker_name: Optional[str] = None
    progress: float = 0.0
    message: str = ""
    started_at: Optional[str] = None
    finished_at: Optional[str] = None
    gpu_seconds: float = 0.0
    cost: float = 0.0
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class TaskAttempt(_Result):
    """One attempt of a task: where it ran and how it ended (``outcome``)."""

    attempt: int = 0
    worker: Optional[str] = None
    outcome: str = ""
    failure_class: Optional[str] = None
    message: str = ""
    charged: Optional[bool] = None
    gpus: List[int] = field(default_factory=list)
    started_at: Optional[str] = None
    ended_at: Optional[str] = None
    log: str = ""


@dataclass
class TaskLog(_Result):
    """A task's attempt history with each attempt's log."""

    _nested = {"attempts": _list_of(TaskAttempt.from_json)}

    task_id: int = 0
    state: str = ""
    message: str = ""
    failures: int = 0
    failures_total: int = 0
    attempts: List[TaskAttempt] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Why(_Result):
    """Why a task is (not) running."""

    task_id: int = 0
    state: str = ""
    reason: str = ""
    details: List[str] = field(default_factory=list)
    checkpoint: Optional[Dict[str, int]] = None
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Frame(_Result):
    """One frame of a job: its state and how many of its parts are done."""

    frame: int = 0
    state: str = ""
    parts_total: int = 0
    parts_done: int = 0
    thumbnail: bool = False
    flag: Optional[str] = None


@dataclass
class Worker(_Result):
    """A worker the farm knows (``state``: idle, busy, offline)."""

    id: int = 0
    name: str = ""
    hostname: str = ""
    state: str = ""
    cpu_cores: int = 0
    ram_mb: int = 0
    gpus: List[Dict[str, Any]] = field(default_factory=list)
    backends: List[str] = field(default_factory=list)
    pools: List[str] = field(default_factory=list)
    tags: List[str] = field(default_factory=list)
    version: str = ""
    current_tasks: List[int] = field(default_factory=list)
    slots: Optional[int] = None
    slots_used: Optional[int] = None
    health: Optional[str] = None
    health_reason: str = ""
    disabled: bool = False
    node_group: str = ""
    cost: float = 0.0
    registered_at: str = ""
    last_seen: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class WorkerAction(_Result):
    """A worker action the scheduler carried out (drain, revoke, readmit, disable, enable)."""

    worker: str = ""
    action: str = ""


@dataclass
class PluginSetting(_Result):
    """A setting a renderer takes: its type, range or allowed values, default."""

    name: str = ""
    type: str = ""
    description: str = ""
    default: Optional[str] = None
    values: List[str] = field(default_factory=list)
    min: Optional[float] = None
    max: Optional[float] = None


@dataclass
class Plugin(_Result):
    """A renderer the scheduler knows, and what a job may give it."""

    _nested = {"settings": _list_of(PluginSetting.from_json)}

    name: str = ""
    description: str = ""
    kind: str = ""
    tiles: bool = False
    sample_parts: bool = False
    settings: List[PluginSetting] = field(default_factory=list)

    def setting(self, name: str) -> Optional[PluginSetting]:
        """The setting called `name`, or None."""
        return next((s for s in self.settings if s.name == name), None)


@dataclass
class WorkerPlugins(_Result):
    """The renderers one connected worker offers: name -> version."""

    _nested = {"plugins": lambda items: {p.get("name", ""): p.get("version", "")
                                         for p in items or [] if isinstance(p, dict)}}

    id: int = 0
    name: str = ""
    plugins: Dict[str, str] = field(default_factory=dict)


@dataclass
class Plugins(_Result):
    """Every renderer the scheduler knows, and which connected worker offers which."""

    _nested = {"plugins": _list_of(Plugin.from_json),
               "workers": _list_of(WorkerPlugins.from_json)}

    plugins: List[Plugin] = field(default_factory=list)
    workers: List[WorkerPlugins] = field(default_factory=list)

    def plugin(self, name: str) -> Optional[Plugin]:
        """The renderer called `name`, or None."""
        return next((p for p in self.plugins if p.name == name), None)

    def offered_by(self, name: str) -> List[str]:
        """The connected workers that offer the renderer `name`."""
        return [w.name for w in self.workers if name in w.plugins]


@dataclass
class OutputFile(_Result):
    """A file of a job's output: a frame file (``frame``, ``format``) or a returned file."""

    name: str = ""
    size: int = 0
    frame: Optional[int] = None
    format: Optional[str] = None
    flag: Optional[str] = None
    step: Optional[str] = None
    sha256: Optional[str] = None


@dataclass
class Summary(_Result):
    """The farm at a glance: jobs, tasks and workers by state, cost, alerts, version."""

    _nested = {"tasks": TaskCounts.from_json}

    jobs: Dict[str, int] = field(default_factory=dict)
    tasks: TaskCounts = field(default_factory=TaskCounts)
    workers: Dict[str, int] = field(default_factory=dict)
    cost: Dict[str, float] = field(default_factory=dict)
    throughput_per_min: float = 0.0
    alerts: List[Dict[str, str]] = field(default_factory=list)
    version: str = ""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class CostDay(_Result):
    """What the farm cost on one UTC day."""

    day: str = ""
    cost: float = 0.0
    gpu_seconds: float = 0.0


@dataclass
class Costs(_Result):
    """The farm's cost per UTC day, and their total."""

    _nested = {"days": _list_of(CostDay.from_json)}

    days: List[CostDay] = field(default_factory=list)
    total: float = 0.0


@dataclass
class ApiToken(_Result):
    """An API token (never its secret)."""

    id: int = 0
    user: str = ""
    role: str = ""
    note: str = ""
    created_at: str = ""
    expires_at: Optional[str] = None
    state: str = ""


@dataclass
class NewApiToken(_Result):
    """A token just created: ``token`` is its secret, shown this once."""

    _nested = {"api_token": ApiToken.from_json}

    token: str = field(default="", repr=False)
    api_token: ApiToken = field(default_factory=ApiToken)


@dataclass
class JoinToken(_Result):
    """A worker join token (never its secret)."""

    id: int = 0
    note: str = ""
    created_at: str = ""
    expires_at: Optional[str] = None
    max_uses: int = 0
    uses: int = 0
    worker: Optional[str] = None
    state: str = ""


@dataclass
class NewJoinToken(_Result):
    """A join token just created, with the scheduler's public key its workers pin."""

    _nested = {"join_token": JoinToken.from_json}

    token: str = field(default="", repr=False)
    join_token: JoinToken = field(default_factory=JoinToken)
    scheduler_public_key: str = ""
    security: str = ""


@dataclass
class Event:
    """One event of the live stream: ``kind`` job, frame, worker, notice (or missed)."""

    seq: int = 0
    kind: str = ""
    data: Dict[str, Any] = field(default_factory=dict)

    @property
    def job_id(self) -> Optional[int]:
        """The job the event is about, if any."""
        value = self.data.get("job_id")
        return value if isinstance(value, int) else None


@dataclass
class UploadedAsset:
    """A job file and its blob: ``uploaded`` is False when the farm had it already."""

    name: str
    path: str
    sha256: str
    size: int
    uploaded: bool


@dataclass
class Submission:
    """What submit did: the job created (or the dry run's answer) and the files sent."""

    job: Optional[Job] = None
    dry_run: Optional[DryRun] = None
    assets: List[UploadedAsset] = field(default_factory=list)

    @property
    def uploaded(self) -> List[UploadedAsset]:
        """The assets actually uploaded (the farm lacked them)."""
        return [a for a in self.assets if a.uploaded]


@dataclass
class FetchResult:
    """What fetch did: files downloaded, files already there whole, bytes written."""

    directory: str = ""
    fetched: List[str] = field(default_factory=list)
    kept: List[str] = field(default_factory=list)
    bytes: int = 0
