"""Submit to Tessera, Cancel, Open in Dashboard, Refresh.

``bpy.ops.tessera.submit()`` from a script (or in background mode) runs to the end and returns;
a failure raises RuntimeError with the reason, as any operator error does. From the panel it
runs in the background of the session: the copy of the .blend is written first (Blender's data
is touched only on the main thread), then the farm is checked, the files uploaded (only those it
lacks) and the job submitted on a thread, with progress in the status bar and the panel; Esc or
Cancel stops an upload before the job is created.
"""

from __future__ import annotations

import os
import threading
import traceback
import webbrowser
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Set

import bpy
from bpy.props import BoolProperty, IntProperty, StringProperty

from . import farm
from .farm import tc
from .packaging import MissingFilesError, pack_shot
from .preferences import preferences

__all__ = ["STATE", "SubmitState", "CLASSES"]


@dataclass
class SubmitState:
    """The submission in progress or last finished, for the panel, the status bar and
    scripts."""

    running: bool = False
    text: str = ""
    fraction: float = 0.0
    job_id: Optional[int] = None
    dashboard_url: str = ""
    uploaded: List[str] = field(default_factory=list)
    carried: List[str] = field(default_factory=list)
    error: str = ""
    cancel: threading.Event = field(default_factory=threading.Event)


STATE = SubmitState()


class _Overrides:
    """The panel's settings, with what the operator was called with taking precedence."""

    def __init__(self, settings: Any, operator: Any) -> None:
        self._settings = settings
        self._operator = operator

    def __getattr__(self, name: str) -> Any:
        op = self._operator
        if name in ("job_name", "chunk_size", "priority") and op.properties.is_property_set(name):
            return getattr(op, name)
        if name == "samples" and op.properties.is_property_set("samples"):
            return op.samples
        if name == "override_samples" and op.properties.is_property_set("samples"):
            return True
        return getattr(self._settings, name)


@dataclass
class _Plan:
    client: Any
    job: Dict[str, Any]
    files: Dict[str, str]
    base_dir: str
    dry_run: bool
    copy: str  # the copy of the .blend, removed once it is sent (or refused)


def _frames(operator: Any, scene: Any, settings: Any) -> "tuple[int, int]":
    props = operator.properties
    if props.is_property_set("frame_start") or props.is_property_set("frame_end"):
        first = operator.frame_start if props.is_property_set("frame_start") else scene.frame_start
        last = operator.frame_end if props.is_property_set("frame_end") else first
    elif settings.use_scene_range:
        first, last = scene.frame_start, scene.frame_end
    else:
        first, last = settings.frame_start, settings.frame_end
    if first > last:
        raise ValueError(f"frames {first}-{last}: the first frame is after the last")
    if first < scene.frame_start or last > scene.frame_end:
        raise ValueError(f"frames {first}-{last} are not in the scene's frame range "
                         f"{scene.frame_start}-{scene.frame_end}")
    return first, last


def _plan(operator: Any, context: Any) -> _Plan:
    """Everything that needs Blender's data, on the main thread: checks, then the copy."""
    if not bpy.data.filepath:
        raise ValueError("save the .blend file first: the farm renders a copy of the saved file")
    scene = context.scene
    settings = _Overrides(scene.tessera, operator)
    frames = _frames(operator, scene, settings)
    client = farm.connect(preferences(context))
    shot = pack_shot()
    files = dict(shot.files)
    job = farm.farm_job(settings, scene, frames, shot.scene_name, list(files))
    files[shot.scene_name] = shot.scene_path
    if shot.not_carried:
        print("Tessera: not carried (linked libraries' own files; render those from shared "
              "storage):", *shot.not_carried, sep="\n  ")
    STATE.carried = sorted(files)
    return _Plan(client, job, files, os.path.dirname(shot.scene_path), operator.dry_run,
                 shot.scene_path)


def _run(plan: _Plan) -> None:
    """The network part (any thread): check the farm, upload what it lacks, submit."""
    try:
        _send(plan)
    finally:
        try:
            os.remove(plan.copy)
        except OSError:
            pass


def _send(plan: _Plan) -> None:
    client = plan.client
    offering = client.plugins().offered_by(farm.RENDERER)
    if not offering:
        raise ValueError(f"no connected worker of the farm at {client.server} offers the "
                         f"'{farm.RENDERER}' renderer; nothing was submitted")

    def progress(p: Any) -> None:
        if p.stage == "uploading":
            STATE.text = f"Uploading {p.done + 1} of {p.total}: {p.name}"
            STATE.fraction = (p.done + (p.bytes_done / p.bytes_total if p.bytes_total else 0)) \
                / max(1, p.total)
        else:
            STATE.text = {"hashing": "Hashing files", "checking": "Checking with the farm",
                          "submitting": "Submitting", "submitted": "Submitted"}.get(p.stage,
                                                                                    p.stage)

    submission = client.submit(plan.job, files=plan.files, base_dir=plan.base_dir,
                               dry_run=plan.dry_run, progress=progress, cancel=STATE.cancel)
    STATE.uploaded = [a.name for a in submission.uploaded]
    if submission.job is not None:
        STATE.job_id = submission.job.id
        STATE.dashboard_url = client.dashboard_url(submission.job.id)
        STATE.text = (f"Submitted job {submission.job.id} ({len(STATE.uploaded)} of "
                      f"{len(submission.assets)} files uploaded)")
    else:
        STATE.text = f"Checked: {submission.dry_run.tasks} task(s); nothing was submitted"


def _explain(error: BaseException) -> str:
    """The artist's one line for a failure; a bug's traceback goes to the console only."""
    if isinstance(error, tc.AuthenticationError):
        return (f"the farm refused the token (HTTP 401: {error}); check the Tessera add-on's "
                "preferences")
    if isinstance(error, tc.PermissionDeniedError):
        return f"the farm does not allow this (HTTP 403: {error})"
    if isinstance(error, (tc.TesseraError, ValueError, MissingFilesError)):
        return str(error)
    traceback.print_exception(type(error), error, error.__traceback__)
    return f"submitting failed: {type(error).__name__}: {error} (details in the console)"


class TESSERA_OT_submit(bpy.types.Operator):
    """Save a copy of this .blend, upload it and the files it uses, and submit a blender job"""

    bl_idname = "tessera.submit"
    bl_label = "Submit to Tessera"

    job_name: StringProperty(name="Job Name", description="Overrides the panel's")
    frame_start: IntProperty(name="Start", description="First frame (default: the panel's)")
    frame_end: IntProperty(name="End",
                           description="Last frame (default: Start when only Start is given, "
                                       "else the panel's)")
    chunk_size: IntProperty(name="Chunk", min=1, max=1000, default=1)
    priority: IntProperty(name="Priority", min=0, max=100, default=50)
    samples: IntProperty(name="Samples", min=1, max=65536, default=128)
    dry_run: BoolProperty(name="Dry Run", description="Only check with the farm; submit nothing")

    _timer: Any = None
    _thread: Optional[threading.Thread] = None
    _outcome: Dict[str, BaseException] = {}

    @classmethod
    def poll(cls, context: Any) -> bool:
        return not STATE.running

    def _start(self, context: Any) -> Optional[_Plan]:
        STATE.running, STATE.error, STATE.job_id, STATE.dashboard_url = True, "", None, ""
        STATE.text, STATE.fraction, STATE.uploaded, STATE.carried = "Saving a copy", 0.0, [], []
        STATE.cancel.clear()
        try:
            return _plan(self, context)
        except Exception as e:  # noqa: BLE001 - shown to the artist as one line
            self._fail(_explain(e))
            return None

    def _fail(self, message: str) -> None:
        STATE.running, STATE.error, STATE.text = False, message, ""
        self.report({"ERROR"}, message)

    def _finish(self) -> Set[str]:
        STATE.running = False
        self.report({"INFO"}, STATE.text + (f": {STATE.dashboard_url}"
                                            if STATE.dashboard_url else ""))
        return {"FINISHED"}

    def execute(self, context: Any) -> Set[str]:
        """From a script: everything to the end, here."""
        plan = self._start(context)
        if plan is None:
            return {"CANCELLED"}
        try:
            _run(plan)
        except Exception as e:  # noqa: BLE001
            self._fail(_explain(e))
            return {"CANCELLED"}
        return self._finish()

    def invoke(self, context: Any, event: Any) -> Set[str]:
        """From the panel: the copy here, the upload and submit on a thread."""
        plan = self._start(context)
        if plan is None:
            return {"CANCELLED"}

        outcome: Dict[str, BaseException] = {}

        def work() -> None:  # touches no Blender data: the plan holds all it needs
            try:
                _run(plan)
            except BaseException as e:  # noqa: BLE001 - handed to the main thread
                outcome["error"] = e

        self._outcome = outcome
        self._thread = threading.Thread(target=work, name="tessera-submit", daemon=True)
        self._thread.start()
        wm = context.window_manager
        self._timer = wm.event_timer_add(0.2, window=context.window)
        wm.progress_begin(0, 100)
        wm.modal_handler_add(self)
        return {"RUNNING_MODAL"}

    def modal(self, context: Any, event: Any) -> Set[str]:
        """Shows the thread's progress; Esc cancels the upload."""
        if event.type == "ESC":
            STATE.cancel.set()
        if event.type != "TIMER":
            return {"PASS_THROUGH"}
        wm = context.window_manager
        wm.progress_update(int(STATE.fraction * 100))
        context.workspace.status_text_set(f"Tessera: {STATE.text} (Esc cancels)")
        for area in context.screen.areas:
            if area.type == "PROPERTIES":
                area.tag_redraw()
        if self._thread is not None and self._thread.is_alive():
            return {"RUNNING_MODAL"}
        wm.event_timer_remove(self._timer)
        wm.progress_end()
        context.workspace.status_text_set(None)
        if "error" in self._outcome:
            self._fail(_explain(self._outcome["error"]))
            return {"CANCELLED"}
        return self._finish()


class TESSERA_OT_cancel(bpy.types.Operator):
    """Stop the upload in progress; no job is created"""

    bl_idname = "tessera.cancel"
    bl_label = "Cancel Submit"

    def execute(self, context: Any) -> Set[str]:
        STATE.cancel.set()
        return {"FINISHED"}


class TESSERA_OT_open_dashboard(bpy.types.Operator):
    """Open the farm's dashboard (the last job submitted, when there is one)"""

    bl_idname = "tessera.open_dashboard"
    bl_label = "Open in Dashboard"

    def execute(self, context: Any) -> Set[str]:
        try:
            url = STATE.dashboard_url or farm.connect(preferences(context)).dashboard_url()
        except tc.TesseraError as e:
            self.report({"ERROR"}, str(e))
            return {"CANCELLED"}
        webbrowser.open(url)
        return {"FINISHED"}


class TESSERA_OT_refresh(bpy.types.Operator):
    """Ask the farm again for its pools and the blender renderer's settings"""

    bl_idname = "tessera.refresh"
    bl_label = "Refresh from Farm"

    def execute(self, context: Any) -> Set[str]:
        info = farm.refresh(preferences(context))
        if info.error:
            self.report({"ERROR"}, info.error)
            return {"CANCELLED"}
        self.report({"WARNING"} if info.api_problem else {"INFO"},
                    info.api_problem or farm.summary_line(info))
        return {"FINISHED"}


CLASSES = (TESSERA_OT_submit, TESSERA_OT_cancel, TESSERA_OT_open_dashboard, TESSERA_OT_refresh)
