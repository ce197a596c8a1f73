"""The add-on's preferences: the farm's address, token and CA file. Blender keeps them in its
user preferences (userpref.blend), never in the .blend a shot is saved to; left empty, the
CLI's TESSERA_SERVER / TESSERA_TOKEN / TESSERA_CA_FILE and ~/.config/tessera/config.yaml are
used."""

from __future__ import annotations

from typing import Any, Set

import bpy
from bpy.props import StringProperty

from . import farm

__all__ = ["TesseraPreferences", "TESSERA_OT_test_connection", "preferences", "CLASSES"]


def preferences(context: Any) -> "TesseraPreferences":
    """This add-on's preferences."""
    return context.preferences.addons[__package__].preferences


class TESSERA_OT_test_connection(bpy.types.Operator):
    """Ask the farm for its version, workers and renderers"""

    bl_idname = "tessera.test_connection"
    bl_label = "Test Connection"

    def execute(self, context: Any) -> Set[str]:
        info = farm.refresh(preferences(context))
        if info.error:
            self.report({"ERROR"}, info.error)
            return {"CANCELLED"}
        if info.api_problem:
            self.report({"WARNING"}, info.api_problem)
        elif not info.offering:
            self.report({"WARNING"}, f"{farm.summary_line(info)}: no connected worker offers "
                                     f"the {farm.RENDERER} renderer")
        else:
            self.report({"INFO"}, farm.summary_line(info))
        return {"FINISHED"}


class TesseraPreferences(bpy.types.AddonPreferences):
    """Where the farm is and how to sign in."""

    bl_idname = __package__

    server: StringProperty(
        name="Farm Address",
        description="The scheduler's API, e.g. https://farm:8470 (empty: $TESSERA_SERVER or "
                    "the tessera config file)")
    token: StringProperty(
        name="Token", subtype="PASSWORD",
        description="An API token with the submitter role, tsra-... (empty: $TESSERA_TOKEN or "
                    "the tessera config file)")
    ca_file: StringProperty(
        name="CA File", subtype="FILE_PATH",
        description="PEM certificates to trust for an https:// farm (empty: the system's)")

    def draw(self, context: Any) -> None:
        layout = self.layout
        layout.prop(self, "server")
        layout.prop(self, "token")
        layout.prop(self, "ca_file")
        row = layout.row()
        row.operator(TESSERA_OT_test_connection.bl_idname, icon="PLUGIN")
        info = farm.INFO
        if info.server or info.error:
            box = layout.box()
            box.label(text=farm.summary_line(info), icon="ERROR" if info.error else "INFO")
            if info.api_problem:
                box.label(text=info.api_problem, icon="ERROR")
            for worker in info.workers[:8]:
                box.label(text=worker, icon="DOT")


CLASSES = (TESSERA_OT_test_connection, TesseraPreferences)
