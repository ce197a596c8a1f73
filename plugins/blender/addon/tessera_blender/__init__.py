"""Tessera for Blender: submit the open .blend to a Tessera render farm.

The panel is in Properties > Output > Tessera Render Farm; the farm's address and token are the
add-on's preferences. Pipeline scripts call ``bpy.ops.tessera.submit(frame_start=1,
frame_end=24)`` and read :func:`last_submission`.
"""

bl_info = {
    "name": "Tessera Render Farm",
    "author": "Tessera contributors",
    "version": (0, 1, 0),
    "blender": (3, 4, 0),
    "location": "Properties > Output > Tessera Render Farm",
    "description": "Submit the open .blend to a Tessera render farm",
    "category": "Render",
}

from typing import Any, Dict  # noqa: E402

import bpy  # noqa: E402

from . import operators, panel, preferences, properties  # noqa: E402

_CLASSES = preferences.CLASSES + operators.CLASSES + panel.CLASSES


def last_submission() -> Dict[str, Any]:
    """The last submission of this session: job id, dashboard URL, files uploaded and carried,
    the error (empty when it worked)."""
    s = operators.STATE
    return {"job_id": s.job_id, "dashboard_url": s.dashboard_url, "uploaded": list(s.uploaded),
            "carried": list(s.carried), "error": s.error, "message": s.text}


def register() -> None:
    """Adds the settings, preferences, operators and panel to Blender."""
    properties.register()
    for cls in _CLASSES:
        bpy.utils.register_class(cls)


def unregister() -> None:
    """Removes what register() added."""
    for cls in reversed(_CLASSES):
        bpy.utils.unregister_class(cls)
    properties.unregister()
