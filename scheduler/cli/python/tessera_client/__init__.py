"""tessera_client: the Python client of a Tessera render farm's HTTP API.

Standard library only (PyYAML is used for YAML job files when it is installed), Python 3.9 or
newer, so it runs inside Blender's and other DCCs' Python::

    from tessera_client import Client

    farm = Client()                      # server, token, CA: arguments, TESSERA_*, config file
    sub = farm.submit("shots/sh010/job.yaml")          # uploads only what the farm lacks
    job = farm.wait(sub.job.id, progress=lambda j: print(j.state, f"{j.progress:.0%}"))
    if job.succeeded:
        farm.fetch(job.id, "frames/")    # resumable; checked against the listed sizes
"""

from .client import API_VERSION, Client, WaitTimeoutError
from .config import DEFAULT_SERVER, Connection, resolve_connection
from .errors import (ApiError, AuthenticationError, CancelledError, ConflictError,
                     InvalidArgumentError, InvalidInputError, NotFoundError,
                     PermissionDeniedError, StorageFullError, TesseraError, TransferError,
                     UnreachableError, UnsafePathError)
from .events import EventStream
from .fetch import FetchProgress
from .models import (ApiToken, CostDay, Costs, DryRun, Event, FetchResult, Frame, Job,
                     JoinToken, NewApiToken, NewJoinToken, OutputFile, Plugin, Plugins,
                     PluginSetting, Submission, Summary, Task, TaskAttempt, TaskCounts, TaskLog,
                     UploadedAsset, WhoAmI, Why, Worker, WorkerAction, WorkerPlugins)
from .paths import path_problem, safe_asset_name
from .submit import SubmitProgress

__version__ = "0.1.0"

__all__ = [
    "API_VERSION", "Client", "WaitTimeoutError", "DEFAULT_SERVER", "Connection",
    "resolve_connection", "ApiError", "AuthenticationError", "CancelledError", "ConflictError",
    "InvalidArgumentError", "InvalidInputError", "NotFoundError", "PermissionDeniedError",
    "StorageFullError", "TesseraError", "TransferError", "UnreachableError", "UnsafePathError",
    "EventStream", "FetchProgress", "SubmitProgress", "ApiToken", "CostDay", "Costs", "DryRun",
    "Event", "FetchResult", "Frame", "Job", "JoinToken", "NewApiToken", "NewJoinToken",
    "OutputFile", "Plugin", "Plugins", "PluginSetting", "Submission", "Summary", "Task",
    "TaskAttempt", "TaskCounts", "TaskLog", "UploadedAsset", "WhoAmI", "Why", "Worker",
    "WorkerAction", "WorkerPlugins", "path_problem", "safe_asset_name", "__version__",
]
