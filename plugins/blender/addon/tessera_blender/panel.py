"""The Tessera panel in the Output properties: the job's settings, Submit and the dashboard."""

from __future__ import annotations

from typing import Any

import bpy

from . import farm
from .operators import STATE
from .preferences import preferences

__all__ = ["TESSERA_PT_submit", "CLASSES"]


class TESSERA_PT_submit(bpy.types.Panel):
    """Render this .blend on a Tessera farm"""

    bl_idname = "TESSERA_PT_submit"
    bl_label = "Tessera Render Farm"
    bl_space_type = "PROPERTIES"
    bl_region_type = "WINDOW"
    bl_context = "output"

    def draw(self, context: Any) -> None:
        layout = self.layout
        layout.use_property_split = True
        layout.use_property_decorate = False
        scene = context.scene
        s = scene.tessera
        farm.refresh_in_background(preferences(context))
        info = farm.INFO

        layout.prop(s, "job_name")
        col = layout.column(align=True)
        col.prop(s, "use_scene_range")
        if s.use_scene_range:
            col.label(text=f"Frames {scene.frame_start}-{scene.frame_end}")
        else:
            col.prop(s, "frame_start")
            col.prop(s, "frame_end")
        layout.prop(s, "chunk_size")
        layout.prop(s, "priority")

        col = layout.column(heading="Workers")
        col.prop(s, "pool")
        col.prop(s, "tags")
        col.prop(s, "cpu_cores")
        col.prop(s, "ram_mb")
        if info.plugin is None or info.plugin.tiles:
            row = layout.row(align=True, heading="Tiles")
            row.prop(s, "tiles_x", text="X")
            row.prop(s, "tiles_y", text="Y")

        col = layout.column(heading="Cycles")
        col.prop(s, "device")
        if s.device == "GPU":
            col.prop(s, "gpu_api")
            col.prop(s, "gpu_memory_mb")
        col.prop(s, "override_samples")
        samples = info.setting("samples")
        if s.override_samples:
            col.prop(s, "samples")
            if samples is not None and samples.max is not None:
                col.label(text=f"The farm allows {samples.min:g}-{samples.max:g}")
        else:
            col.label(text=f"Samples {scene.cycles.samples}, seed {scene.cycles.seed}")

        col = layout.column(heading="Frames")
        col.prop(s, "output_pattern")
        row = col.row(align=True)
        row.prop(s, "output_exr", toggle=True)
        row.prop(s, "output_png", toggle=True)

        layout.use_property_split = False
        row = layout.row(align=True)
        row.scale_y = 1.4
        if STATE.running:
            row.label(text=STATE.text, icon="SORTTIME")
            row.operator("tessera.cancel", text="", icon="CANCEL")
        else:
            row.operator("tessera.submit", icon="EXPORT")
        row = layout.row(align=True)
        row.operator("tessera.open_dashboard", icon="URL",
                     text=f"Open Job {STATE.job_id} in Dashboard" if STATE.job_id
                     else "Open in Dashboard")
        row.operator("tessera.refresh", text="", icon="FILE_REFRESH")

        if STATE.error:
            layout.label(text=STATE.error, icon="ERROR")
        elif STATE.job_id is not None:
            layout.label(text=STATE.text, icon="CHECKMARK")
        if info.error:
            layout.label(text=info.error, icon="ERROR")
        elif info.api_problem:
            layout.label(text=info.api_problem, icon="ERROR")
        elif info.server and not info.offering:
            layout.label(text=f"No connected worker offers {farm.RENDERER}", icon="ERROR")


CLASSES = (TESSERA_PT_submit,)
