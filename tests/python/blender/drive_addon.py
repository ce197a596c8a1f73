"""Run by Blender (blender -b --factory-startup --python drive_addon.py -- PARAMS.json): installs
the add-on's zip into the (temporary) user folder Blender was given, then drives it as an artist
or a pipeline script would, writing what happened to PARAMS' "results" file as JSON."""

import json
import os
import sys

import bpy

params = json.load(open(sys.argv[sys.argv.index("--") + 1]))
results = {}


def attempt(label, **kwargs):
    """Calls the submit operator; records its result or the error it reported."""
    try:
        outcome = sorted(bpy.ops.tessera.submit(**kwargs))
        error = ""
    except RuntimeError as e:
        outcome, error = ["ERROR"], str(e)
    import tessera_blender
    results[label] = {"outcome": outcome, "error": error, **tessera_blender.last_submission()}


bpy.ops.preferences.addon_install(filepath=params["addon_zip"])
bpy.ops.preferences.addon_enable(module="tessera_blender")
prefs = bpy.context.preferences.addons["tessera_blender"].preferences
prefs.server, prefs.token = params["server"], params["token"]
results["installed_in"] = os.path.dirname(os.path.dirname(
    sys.modules["tessera_blender"].__file__))

attempt("unsaved", frame_start=1, frame_end=1)
bpy.ops.wm.open_mainfile(filepath=params["blend"])
bpy.ops.tessera.test_connection()
results["connection"] = sys.modules["tessera_blender"].farm.summary_line(
    sys.modules["tessera_blender"].farm.INFO)



class Layout:
    """Stands in for Blender's UI layout: records the properties the panel draws."""

    drawn = []

    def __getattr__(self, name):
        return lambda *args, **kwargs: self

    def prop(self, data, name, **kwargs):
        assert hasattr(data, name), name
        Layout.drawn.append(name)
        return self

    def operator(self, idname, **kwargs):
        assert hasattr(bpy.ops.tessera, idname.split(".")[1]), idname
        return self


panel = bpy.types.TESSERA_PT_submit
settings = bpy.context.scene.tessera
for device, tiles in (("CPU", 1), ("GPU", 2)):
    settings.device, settings.tiles_x = device, tiles
    panel.draw(type("Panel", (), {"layout": Layout()})(), bpy.context)
settings.pool = "main"  # a pool the farm's workers serve is a choice (TypeError otherwise)
results["panel"] = {"drawn": sorted(set(Layout.drawn)), "gpu_api": settings.gpu_api,
                    "pool": settings.pool}
settings.device, settings.tiles_x, settings.pool = "CPU", 1, "ANY"

attempt("frames_outside", frame_start=1, frame_end=40)
prefs.token = "tsra-" + "0" * 64
attempt("wrong_token", frame_start=1, frame_end=2)
prefs.token = params["token"]
prefs.server = params["no_server"]
attempt("no_server", frame_start=1, frame_end=2)
prefs.server = params["bare_farm"]
prefs.token = params["bare_token"]
attempt("no_blender_plugin", frame_start=1, frame_end=2)
prefs.server, prefs.token = params["server"], params["token"]

ball = bpy.data.images[params["outside_name"]]
kept = ball.filepath
ball.filepath = kept + ".gone.png"
attempt("missing_file", frame_start=1, frame_end=2)
ball.filepath = kept

bpy.context.scene.tessera.output_pattern = "shot.####"
attempt("dry_run", frame_start=1, frame_end=2, samples=4, dry_run=True)
attempt("first", frame_start=1, frame_end=2, samples=4)
attempt("second", frame_start=1, frame_end=2, samples=4)
results["paths_after"] = sorted(i.filepath for i in bpy.data.images if i.filepath)
results["is_dirty"] = bpy.data.is_dirty
json.dump(results, open(params["results"], "w"), indent=2)
