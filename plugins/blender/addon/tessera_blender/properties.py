"""The job settings the panel edits, kept on the scene (they travel in the .blend; the farm's
address and token never do: those are the add-on's preferences)."""

from __future__ import annotations

from typing import Any, List, Tuple

import bpy
from bpy.props import (BoolProperty, EnumProperty, IntProperty, PointerProperty,
                       StringProperty)

from . import farm

__all__ = ["TesseraJobSettings", "register", "unregister"]

# Blender keeps only references to enum item strings: the lists live here between redraws.
_ITEMS: dict = {}


def _pools(self: Any, context: Any) -> List[Tuple[str, str, str]]:
    items = [("ANY", "Any", "Any worker of the farm")]
    items += [(p, p, f"Only workers of pool {p}") for p in farm.INFO.pools]
    _ITEMS["pools"] = items
    return items


def _gpu_apis(self: Any, context: Any) -> List[Tuple[str, str, str]]:
    setting = farm.INFO.setting("gpu_api")
    if setting is None or not setting.values:
        items = [(farm.UNKNOWN, "Farm's Default", "The farm's default (Refresh to choose)")]
    else:
        items = [(v, v, f"Cycles renders with {v} on the task's GPUs") for v in setting.values]
    _ITEMS["gpu_api"] = items
    return items


class TesseraJobSettings(bpy.types.PropertyGroup):
    """What a submission asks the farm for."""

    job_name: StringProperty(name="Job Name", description="Empty: the .blend file's name",
                             maxlen=128)
    use_scene_range: BoolProperty(name="Scene Range", default=True,
                                  description="Render the scene's frame range")
    frame_start: IntProperty(name="Start", default=1, description="First frame to render")
    frame_end: IntProperty(name="End", default=250, description="Last frame to render")
    chunk_size: IntProperty(name="Chunk", default=1, min=1, max=1000,
                            description="Frames per task (Blender starts once per task)")
    priority: IntProperty(name="Priority", default=50, min=0, max=100,
                          description="Higher runs first")
    pool: EnumProperty(name="Pool", items=_pools,
                       description="Run only on workers of this pool (the farm's pools)")
    tags: StringProperty(name="Tags", description="Comma-separated tags a worker must have")
    cpu_cores: IntProperty(name="CPU Cores", default=0, min=0, max=1024,
                           description="Cores one task holds on its worker (0: not declared)")
    ram_mb: IntProperty(name="RAM (MB)", default=0, min=0,
                        description="Memory one task needs (0: not declared)")
    tiles_x: IntProperty(name="Tiles X", default=1, min=1, max=64,
                         description="Split each frame into this many columns (one frame over "
                                     "many workers)")
    tiles_y: IntProperty(name="Tiles Y", default=1, min=1, max=64,
                         description="Split each frame into this many rows")
    device: EnumProperty(name="Device", items=[("CPU", "CPU", "Render on the workers' CPUs"),
                                               ("GPU", "GPU", "One GPU per task")],
                         default="CPU")
    gpu_api: EnumProperty(name="GPU Backend", items=_gpu_apis,
                          description="The farm's Cycles GPU backends")
    gpu_memory_mb: IntProperty(name="GPU Memory (MB)", default=0, min=0,
                               description="GPU memory one task needs (0: not declared)")
    override_samples: BoolProperty(name="Override Samples", default=False,
                                   description="Render with these samples instead of the "
                                               "scene's")
    samples: IntProperty(name="Samples", default=128, min=1, max=65536)
    output_pattern: StringProperty(
        name="Output", description="Frame file names: a run of '#' is the padded frame "
                                   "number (empty: <job name>.####)")
    output_exr: BoolProperty(name="EXR", default=True, description="Linear EXR frames")
    output_png: BoolProperty(name="PNG", default=True, description="8-bit sRGB previews")


def register() -> None:
    """Adds the settings to every scene (scene.tessera)."""
    bpy.utils.register_class(TesseraJobSettings)
    bpy.types.Scene.tessera = PointerProperty(type=TesseraJobSettings)


def unregister() -> None:
    """Removes the scenes' settings."""
    del bpy.types.Scene.tessera
    bpy.utils.unregister_class(TesseraJobSettings)
