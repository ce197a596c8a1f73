"""The add-on's view of the farm: the Python client it carries, the connection from the
add-on's preferences (or the CLI's TESSERA_* variables and config file when they are empty),
and what the farm offers (renderers and their settings, pools, tags), cached for the panel."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

try:  # the copy of the client the add-on's build put inside it
    from . import tessera_client as tc
except ImportError:  # a checkout of the repository with scheduler/cli/python on sys.path
    import tessera_client as tc  # type: ignore[no-redef]

__all__ = ["tc", "FarmInfo", "INFO", "RENDERER", "UNKNOWN", "connect", "describe_farm", "refresh",
           "refresh_in_background", "summary_line", "farm_job"]

# The farm's renderer this add-on submits to (plugins/blender/plugin.yaml).
RENDERER = "blender"
# An enum's value while the farm has not said what it offers (the renderer's default applies).
UNKNOWN = "FARM_DEFAULT"


@dataclass
class FarmInfo:
    """What the farm said when it was last asked (Test connection / Refresh)."""

    server: str = ""
    version: str = ""
    api_problem: Optional[str] = None
    workers: List[str] = field(default_factory=list)
    offering: List[str] = field(default_factory=list)  # workers offering `blender`
    pools: List[str] = field(default_factory=list)
    tags: List[str] = field(default_factory=list)
    plugin: Optional[Any] = None  # the `blender` renderer's tc.Plugin: its settings
    error: str = ""

    def setting(self, name: str) -> Optional[Any]:
        """The blender renderer's setting `name` as the farm describes it, or None."""
        return self.plugin.setting(name) if self.plugin is not None else None


INFO = FarmInfo()


def connect(prefs: Any, timeout: float = 30.0) -> "tc.Client":
    """A client for the farm in the add-on's preferences; empty fields come from TESSERA_*
    variables and ~/.config/tessera/config.yaml, as for the CLI."""
    return tc.Client(server=prefs.server.strip() or None, token=prefs.token.strip() or None,
                     ca_file=bpy_path(prefs.ca_file) or None, timeout=timeout)


def bpy_path(path: str) -> str:
    """A path from a file property ("//" is relative to the .blend), made absolute."""
    if not path:
        return ""
    import bpy
    return bpy.path.abspath(path)


def describe_farm(client: "tc.Client") -> FarmInfo:
    """Asks the farm for its version, workers, pools, tags and the blender renderer's settings.
    Raises the client's errors (unreachable, 401, ...)."""
    info = FarmInfo(server=client.server)
    info.api_problem = client.check_api_version()
    summary = client.summary()
    info.version = summary.version
    farm_api = summary.raw.get("api_version")
    if info.api_problem is None and farm_api not in (None, tc.API_VERSION):
        info.api_problem = (f"the farm speaks API v{farm_api}, this add-on v{tc.API_VERSION}: "
                            "update the add-on")
    workers = client.workers()
    live = [w for w in workers if w.state != "offline"]
    info.workers = [f"{w.name} ({w.state})" for w in live]
    info.pools = sorted({p for w in live for p in w.pools})
    info.tags = sorted({t for w in live for t in w.tags})
    plugins = client.plugins()
    info.plugin = plugins.plugin(RENDERER)
    info.offering = plugins.offered_by(RENDERER)
    return info


def refresh(prefs: Any) -> FarmInfo:
    """describe_farm() for the preferences' farm, kept in INFO; an error is kept as text."""
    global INFO
    try:  # on Blender's main thread: a farm that does not answer holds the UI this long
        INFO = describe_farm(connect(prefs, timeout=10.0))
    except tc.TesseraError as e:
        INFO = FarmInfo(server=prefs.server, error=str(e))
    return INFO


_REFRESHING = threading.Lock()


def refresh_in_background(prefs: Any) -> None:
    """Asks the farm once, on a thread, when nothing is known yet (the panel's first draw), so
    its choices are there without a click. The preferences are read here, on the main thread."""
    if INFO.server or INFO.error or not _REFRESHING.acquire(blocking=False):
        return
    server, token, ca_file = prefs.server.strip(), prefs.token.strip(), bpy_path(prefs.ca_file)

    def work() -> None:
        global INFO
        try:
            INFO = describe_farm(tc.Client(server=server or None, token=token or None,
                                           ca_file=ca_file or None, timeout=10.0))
        except tc.TesseraError as e:
            INFO = FarmInfo(server=server, error=str(e))
        finally:
            _REFRESHING.release()

    threading.Thread(target=work, name="tessera-farm-info", daemon=True).start()


def summary_line(info: FarmInfo) -> str:
    """One line for the status bar and the preferences."""
    if info.error:
        return info.error
    offering = ", ".join(info.offering) if info.offering else "no worker"
    return (f"Tessera {info.version} at {info.server}: {len(info.workers)} worker(s) connected; "
            f"{RENDERER} offered by {offering}")


def farm_job(settings: Any, scene: Any, frames: "tuple[int, int]", scene_name: str,
             assets: List[str]) -> Dict[str, Any]:
    """The `blender` job for the panel's settings (a Tessera job as a dict)."""
    job: Dict[str, Any] = {
        "name": tc.safe_asset_name(settings.job_name or scene_name.rsplit(".", 1)[0])
        .replace(" ", "_").replace("+", "_")[:128],
        "renderer": RENDERER,
        "scene": scene_name,
        "frames": f"{frames[0]}-{frames[1]}",
        "chunk_size": settings.chunk_size,
        "priority": settings.priority,
        "assets": sorted(assets),
        "output": {"formats": [f for f, on in (("exr", settings.output_exr),
                                               ("png", settings.output_png)) if on] or ["exr"]},
    }
    if settings.output_pattern.strip():
        job["output"]["pattern"] = settings.output_pattern.strip()
    values: Dict[str, Any] = {"samples": settings.samples if settings.override_samples
                              else scene.cycles.samples, "seed": scene.cycles.seed}
    if settings.device == "GPU" and settings.gpu_api != UNKNOWN:
        values["gpu_api"] = settings.gpu_api
    tiles = (settings.tiles_x, settings.tiles_y)
    if tiles != (1, 1):
        job["tiles"] = f"{tiles[0]}x{tiles[1]}"
        render = scene.render
        values["width"] = max(1, render.resolution_x * render.resolution_percentage // 100)
        values["height"] = max(1, render.resolution_y * render.resolution_percentage // 100)
    job["settings"] = values
    if settings.pool != "ANY":
        job["pools"] = [settings.pool]
    tags = [t.strip() for t in settings.tags.split(",") if t.strip()]
    if tags:
        job["tags"] = tags
    resources: Dict[str, Any] = {}
    if settings.device == "GPU":
        resources["gpus"] = 1
        if settings.gpu_memory_mb:
            resources["gpu_memory_mb"] = settings.gpu_memory_mb
    if settings.cpu_cores:
        resources["cpu_cores"] = settings.cpu_cores
    if settings.ram_mb:
        resources["ram_mb"] = settings.ram_mb
    if resources:
        job["resources"] = resources
    return job
