"""The Blender add-on for real: Debian's Blender in background mode installs the add-on's zip
into a temporary user folder, opens a small scene with external image textures and calls the
submit operator against a local farm; the farm renders the frames with its `blender` plugin,
and they equal a direct `blender -b` render of the same file (Cycles, CPU, same samples and
seed). A second submit uploads nothing; bad input gets a message and submits nothing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from farm import REPO, LocalFarm, free_port, require, wait_for
from pngs import write_checker_png

HERE = Path(__file__).resolve().parent
# What the farm's blender plugin runs before rendering (plugins/blender/plugin.yaml).
FARM_EXPR = ("import bpy; s = bpy.context.scene; s.render.engine = 'CYCLES'; "
             "s.cycles.device = 'CPU'; s.cycles.use_denoising = False; "
             "s.cycles.samples = 4; s.cycles.seed = 0")


def run(argv: list, log: Path, timeout: float = 300, env: dict = None) -> None:
    with open(log, "w") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                              env=env, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, log.read_text()[-4000:]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def rgb_difference_ok(a: Path, b: Path, work: Path) -> str:
    """"" when the RGB of two EXRs agree to half-float precision, else idiff's report."""
    rgb = []
    for i, image in enumerate((a, b)):
        rgb.append(work / f"rgb{i}-{image.name}")
        subprocess.run(["oiiotool", str(image), "--ch", "R,G,B", "-d", "float", "-o",
                        str(rgb[-1])], check=True, capture_output=True, timeout=60)
    done = subprocess.run(["idiff", "-fail", "0.002", "-failrelative", "0.002", "-warn",
                           "0.002", "-warnrelative", "0.002", str(rgb[0]), str(rgb[1])],
                          capture_output=True, text=True, timeout=60)
    return "" if done.returncode == 0 else done.stdout + done.stderr


def test_the_addon_submits_a_shot_the_farm_renders_like_blender(tmp_path: Path) -> None:
    blender = shutil.which("blender")
    require(blender is not None, "blender is not installed (apt-get install blender)")
    require(shutil.which("oiiotool") is not None and shutil.which("idiff") is not None,
            "oiiotool/idiff are not installed (apt-get install openimageio-tools)")
    addon_zip = tmp_path / "tessera_blender.zip"
    subprocess.run([sys.executable, str(REPO / "plugins/blender/addon/build_addon.py"), "--zip",
                    str(addon_zip)], check=True, timeout=60)

    project = tmp_path / "project"
    write_checker_png(project / "tex" / "wood chips (1).png")
    write_checker_png(tmp_path / "library" / "ball.png", seed=90)
    blend = project / "shot (v2).blend"  # a name the farm takes only after the add-on cleans it
    run([blender, "-b", "--factory-startup", "-noaudio", "--python",
         str(HERE / "blender" / "make_shot.py"), "--", str(blend),
         str(project / "tex" / "wood chips (1).png"), str(tmp_path / "library" / "ball.png")],
        tmp_path / "make_shot.log")
    original = sha256(blend)

    farm, bare = LocalFarm("addon"), LocalFarm("addon-bare")
    try:
        farm.start_scheduler()
        farm.start_worker("w1", "--threads", "2", "--pool", "main")
        bare.start_scheduler()
        empty = tmp_path / "no-renderers"
        empty.mkdir()
        bare.start_worker("b1", env={"TESSERA_WORKER_PLUGIN_PATH": str(empty)})
        farm.wait_for_workers(1)
        bare.wait_for_workers(1)
        client = farm.client()
        assert wait_for(lambda: client.plugins().offered_by("blender") == ["w1"], 30)

        params = {"addon_zip": str(addon_zip), "blend": str(blend), "server": farm.api_url,
                  "token": farm.token, "no_server": f"http://127.0.0.1:{free_port()}",
                  "bare_farm": bare.api_url, "bare_token": bare.token,
                  "outside_name": "ball.png", "results": str(tmp_path / "results.json")}
        (tmp_path / "params.json").write_text(json.dumps(params))
        user = tmp_path / "blender-user"
        (tmp_path / "tmp").mkdir()
        env = {**os.environ, "BLENDER_USER_CONFIG": str(user / "config"),
               "BLENDER_USER_SCRIPTS": str(user / "scripts"), "TMPDIR": str(tmp_path / "tmp")}
        run([blender, "-b", "--factory-startup", "-noaudio", "--python",
             str(HERE / "blender" / "drive_addon.py"), "--", str(tmp_path / "params.json")],
            tmp_path / "drive_addon.log", env=env)
        results = json.loads((tmp_path / "results.json").read_text())

        # Installed as an ordinary add-on into the temporary user folder.
        assert Path(results["installed_in"]) == user / "scripts" / "addons"
        assert "blender offered by w1" in results["connection"]
        # The panel draws every setting; its choices are the farm's.
        panel = results["panel"]
        assert {"job_name", "chunk_size", "priority", "pool", "tags", "tiles_x", "device",
                "gpu_api", "override_samples", "output_pattern"} <= set(panel["drawn"]), panel
        assert (panel["gpu_api"], panel["pool"]) == ("CUDA", "main"), panel
        # Bad input: a clear message, nothing submitted.
        expected = {
            "unsaved": "save the .blend file first",
            "frames_outside": "frames 1-40 are not in the scene's frame range 1-2",
            "wrong_token": "HTTP 401: this API token is not known",
            "no_server": "cannot reach the Tessera scheduler",
            "no_blender_plugin": "offers the 'blender' renderer",
            "missing_file": "ball.png.gone.png",
        }
        for label, words in expected.items():
            got = results[label]
            assert got["outcome"] == ["ERROR"] and words in got["error"], (label, got)
            assert "Traceback" not in got["error"] and got["job_id"] is None, (label, got)
        assert bare.client().jobs() == []
        assert results["dry_run"]["job_id"] is None and "2 task(s)" in results["dry_run"]["message"]

        first, second = results["first"], results["second"]
        assert first["outcome"] == ["FINISHED"], first
        assert sorted(first["carried"]) == sorted(first["uploaded"]), first
        assert {"shot _v2_.blend", "tex/wood chips _1_.png"} <= set(first["carried"]), first
        assert any(name.startswith("external/library-") for name in first["carried"]), first
        # The same shot again from the same session: every file is on the farm already.
        assert second["outcome"] == ["FINISHED"] and second["uploaded"] == [], second
        assert second["job_id"] != first["job_id"]
        client.cancel(second["job_id"])
        assert [j.id for j in client.jobs(state="canceled")] == [second["job_id"]]
        # The artist's file and paths are as they were; the copies sent are gone.
        assert sha256(blend) == original
        assert not [p for p in (tmp_path / "tmp").rglob("*") if p.is_file()]
        assert any(p.startswith("//tex/wood chips (1).png") for p in results["paths_after"])
        assert str(tmp_path / "library" / "ball.png") in results["paths_after"]

        job = client.wait(first["job_id"], timeout=300)
        assert job.succeeded, (job.error, farm.log(),
                               (farm.dir / "worker-w1.log").read_text()[-3000:])
        assert job.renderer == "blender" and job.user == "admin"
        fetched = client.fetch(job.id, tmp_path / "frames")
        assert sorted(fetched.fetched) == ["shot.0001.exr", "shot.0001.png", "shot.0002.exr",
                                           "shot.0002.png"]

        reference = tmp_path / "direct"
        reference.mkdir()
        run([blender, "-b", "--factory-startup", "-noaudio", str(blend), "--python-expr",
             FARM_EXPR, "-o", str(reference / "ref_####"), "-F", "OPEN_EXR", "-s", "1", "-e",
             "2", "-a"], tmp_path / "direct.log")
        for frame in (1, 2):
            problem = rgb_difference_ok(tmp_path / "frames" / f"shot.{frame:04d}.exr",
                                        reference / f"ref_{frame:04d}.exr", tmp_path)
            assert problem == "", f"frame {frame}: {problem}"
    finally:
        farm.stop()
        bare.stop()
