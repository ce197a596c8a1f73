"""The Python client against a real farm (scheduler + two CPU workers on loopback): every call,
a job to completion with its frames fetched and compared, errors as exceptions."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from farm import LocalFarm, free_port, wait_for
from pngs import write_checker_png
from tessera_client import (AuthenticationError, Client, ConflictError, InvalidArgumentError,
                            InvalidInputError, Job, NotFoundError, PermissionDeniedError,
                            SubmitProgress, UnreachableError, WorkerAction)

SCENE = """width: 32
height: 24
samples: 4
max_depth: 4
background: {top: [0.5, 0.7, 1.0], bottom: [1.0, 1.0, 1.0]}
camera:
  keyframes:
    - {frame: 1, position: [0, 1, 5], look_at: [0, 0.5, 0], fov: 40}
    - {frame: 10, position: [3, 1.5, 4], look_at: [0, 0.5, 0], fov: 40}
materials:
  ground: {type: diffuse, color: [1, 1, 1], texture: tex/checker.png}
  ball: {type: metal, color: [0.9, 0.8, 0.7], roughness: 0.2}
objects:
  - {type: quad, corner: [-10, 0, -10], u: [0, 0, 20], v: [20, 0, 0], material: ground}
  - {type: sphere, center: [0, 0.5, 0], radius: 0.5, material: ball}
"""


def noop(name: str, frames: str = "1-2") -> dict:
    return {"name": name, "renderer": "noop", "frames": frames}


def sleeper(name: str, frames: str = "1-4", seconds: int = 1) -> dict:
    """A job of `sleep` tasks; only w1 (pool main) may run them."""
    return {"name": name, "renderer": "command", "frames": frames, "pools": ["main"],
            "settings": {"program": "sleep", "argv": [str(seconds)]}}


def write_shot(folder: Path) -> Path:
    write_checker_png(folder / "tex" / "checker.png")
    (folder / "scene.yaml").write_text(SCENE)
    job = folder / "job.yaml"
    job.write_text("name: shot\nscene: scene.yaml\nframes: 1-3\n"
                   "output: {pattern: 'shot.####', formats: [exr, png]}\n")
    return job


def test_farm_calls(farm) -> None:
    client = farm.client()
    me = client.whoami()
    assert (me.user, me.role, me.auth) == ("admin", "admin", "token")
    assert client.health()["status"] == "ok"
    assert client.check_api_version() is None
    summary = client.summary()
    assert summary.version and summary.workers["total"] >= 2
    assert client.costs(days=7).total >= 0
    assert "interval_s" in client.history()
    assert "groups" in client.autoscaler()
    assert "tessera_queue_depth" in client.metrics()
    openjd = client.openjd_environments()
    assert openjd["environments"] == []
    assert openjd["path_mapping"] == {"version": "pathmapping-1.0", "path_mapping_rules": []}
    plugins = client.plugins()
    assert plugins.plugin("blender").setting("samples").max == 65536
    assert set(plugins.offered_by("command")) == {"w1"}
    workers = {w.name: w for w in client.workers()}
    assert {"w1", "w2"} <= set(workers) and workers["w1"].pools == ["main"]
    assert client.worker("w2").name == "w2"
    with pytest.raises(NotFoundError) as e:
        client.worker("nobody")
    assert e.value.status == 404 and "nobody" in e.value.message


def test_a_job_renders_to_completion_and_its_frames_are_fetched(farm, tmp_path: Path) -> None:
    client = farm.client()
    job_file = write_shot(tmp_path / "shot")
    stages = []
    sub = client.submit(job_file, progress=stages.append)
    assert [a.name for a in sub.assets] == ["tex/checker.png"] and sub.uploaded
    assert [s.stage for s in stages][-1] == "submitted"
    assert all(isinstance(s, SubmitProgress) for s in stages)
    seen = []
    job = client.wait(sub.job.id, timeout=120, progress=seen.append)
    assert job.succeeded, (job.error, farm.log())
    assert seen and all(isinstance(j, Job) for j in seen) and seen[-1].state == "done"
    assert client.job(job.id).tasks.done == 3

    tasks = client.tasks(job.id)
    assert [t.frame_start for t in tasks] == [1, 2, 3] and {t.state for t in tasks} == {"done"}
    log = client.task_log(tasks[0].id)
    assert log.attempts and log.attempts[-1].outcome == "done"
    assert client.why(tasks[0].id).state == "done"
    assert [f.state for f in client.frames(job.id)] == ["done"] * 3
    assert client.thumbnail(job.id, 1).startswith(b"\x89PNG")

    listed = client.outputs(job.id)
    assert sorted(f.name for f in listed) == sorted(
        f"shot.{n:04d}.{ext}" for n in (1, 2, 3) for ext in ("exr", "png"))
    out = tmp_path / "frames"
    fetched = client.fetch(job.id, out)
    assert sorted(fetched.fetched) == sorted(f.name for f in listed) and not fetched.kept
    for f in listed:
        data = (out / f.name).read_bytes()
        assert len(data) == f.size
        assert data == (Path(job.output_dir) / f.name).read_bytes()

    # Resumable: what is already whole is kept; a broken-off file is fetched again whole.
    (out / "shot.0002.exr").write_bytes(b"broken")
    again = client.fetch(job.id, out)
    assert again.fetched == ["shot.0002.exr"] and len(again.kept) == len(listed) - 1
    assert (out / "shot.0002.exr").read_bytes() == (Path(job.output_dir) /
                                                     "shot.0002.exr").read_bytes()

    # The same shot again: the farm has every file, nothing is uploaded.
    second = client.submit(job_file)
    assert second.assets and not second.uploaded
    assert client.wait(second.job.id, timeout=120).succeeded

    rerendered = client.rerender(job.id, "2-3")
    assert rerendered.raw["tasks_requeued"] == 2
    assert client.wait(job.id, timeout=120).succeeded
    for j in (job.id, second.job.id):
        assert client.delete(j) == j
    with pytest.raises(NotFoundError):
        client.job(job.id)


def test_dict_jobs_dry_runs_and_templates(farm, tmp_path: Path) -> None:
    client = farm.client()
    before = len(client.jobs())
    write_checker_png(tmp_path / "wood.png")
    (tmp_path / "scene.yaml").write_text(SCENE.replace("tex/checker.png", "wood.png"))
    dry = client.submit({"name": "dry", "scene": "scene.yaml", "frames": "1-10"},
                        base_dir=tmp_path, dry_run=True)
    assert dry.job is None and dry.dry_run.tasks == 10 and dry.dry_run.assets == 1
    assert not dry.uploaded and len(client.jobs()) == before

    # A job with steps: each step's scene and files travel; its frames come back per step.
    steps = client.submit({"name": "steps", "frames": "1-2", "steps": [
        {"name": "left", "scene": "scene.yaml"},
        {"name": "right", "scene": "scene.yaml", "depends_on": [{"step": "left"}]}]},
        base_dir=tmp_path)
    assert [a.name for a in steps.assets] == ["wood.png"]
    assert client.wait(steps.job.id, timeout=120).succeeded
    fetched = client.fetch(steps.job.id, tmp_path / "steps")
    assert sorted(fetched.fetched) == sorted(f"{side}/steps.{n:04d}.{ext}"
                                             for side in ("left", "right") for n in (1, 2)
                                             for ext in ("exr", "png")), fetched

    template = {
        "specificationVersion": "jobtemplate-2023-09", "name": "ojd",
        "parameterDefinitions": [{"name": "Seconds", "type": "STRING", "default": "0"}],
        "steps": [{"name": "nap", "parameterSpace": {"taskParameterDefinitions": [
            {"name": "N", "type": "INT", "range": "1-3"}]},
            "script": {"actions": {"onRun": {"command": "sleep",
                                             "args": ["{{Param.Seconds}}"]}}}}]}
    checked = client.submit(template, parameters={"Seconds": "0"}, dry_run=True).dry_run
    assert checked.tasks == 3 and checked.steps[0]["name"] == "nap"
    created = client.submit(template, parameters={"Seconds": "0"}).job
    assert client.wait(created.id, timeout=60).succeeded
    with pytest.raises(InvalidInputError):
        client.submit(noop("p"), parameters={"Seconds": "1"})


def test_job_operations(farm) -> None:
    client = farm.client()
    job = client.submit(sleeper("ops", "1-6", 2)).job
    assert job.user == "admin" and job.state in ("queued", "running")
    assert [j.id for j in client.jobs(user="admin", limit=1)] == [job.id]
    assert client.pause(job.id).state == "paused"
    assert job.id in [j.id for j in client.jobs(state="paused")]
    assert client.resume(job.id).state in ("queued", "running")
    assert client.set_priority(job.id, 80).priority == 80
    with pytest.raises(InvalidArgumentError) as e:
        client.set_priority(job.id, 500)
    assert e.value.status == 400 and e.value.field == "priority"
    assert client.cancel(job.id).state == "canceled"
    with pytest.raises(ConflictError) as e:
        client.cancel(job.id)
    assert e.value.status == 409
    assert client.delete(job.id) == job.id

    # A job whose tasks fail (sleep refuses "x"): its log says why, and retry runs them again.
    failing = client.submit({**sleeper("fails", "1-2", 0), "max_retries": 0, "blocklist_after": 0,
                             "settings": {"program": "sleep", "argv": ["x"]}}).job
    ended = client.wait(failing.id, timeout=60)
    assert ended.state == "failed" and not ended.succeeded and ended.error
    attempt = client.task_log(client.tasks(failing.id, state="failed")[0].id).attempts[-1]
    assert attempt.outcome == "failed" and attempt.message
    retried = client.retry(failing.id)
    assert retried.raw["tasks_requeued"] == 2
    assert client.wait(failing.id, timeout=60).state == "failed"


def test_worker_actions(farm) -> None:
    client = farm.client()
    assert client.disable_worker("w2") == WorkerAction("w2", "disable")
    assert client.worker("w2").disabled
    assert client.enable_worker("w2") == WorkerAction("w2", "enable")
    assert not client.worker("w2").disabled
    farm.start_worker("w3")
    farm.wait_for_workers(3)
    assert client.drain_worker("w3").action == "drain"
    assert wait_for(lambda: client.worker("w3").state == "offline", 30)
    with pytest.raises(NotFoundError, match="enrolled"):
        client.revoke_worker("w3")  # an unencrypted farm enrols no keys


def test_tokens_wrong_token_and_wrong_role(farm) -> None:
    admin = farm.client()
    with pytest.raises(AuthenticationError) as e:
        farm.client(token="tsra-" + "0" * 64).whoami()
    assert e.value.status == 401 and e.value.message

    viewer = admin.create_token("vera", "viewer", note="python client test")
    assert viewer.token.startswith("tsra-") and viewer.api_token.role == "viewer"
    as_viewer = farm.client(token=viewer.token)
    assert as_viewer.whoami().role == "viewer" and as_viewer.jobs() is not None
    before = len(admin.jobs())
    with pytest.raises(PermissionDeniedError) as e:
        as_viewer.submit(noop("not-allowed"))
    assert e.value.status == 403 and "submitter role" in e.value.message
    assert len(admin.jobs()) == before

    ana = farm.client(token=admin.create_token("ana", "submitter").token)
    bob = farm.client(token=admin.create_token("bob", "submitter").token)
    job = ana.submit(sleeper("anas", "1-2", 5)).job
    assert job.user == "ana"
    with pytest.raises(PermissionDeniedError) as e:
        bob.cancel(job.id)
    assert "belongs to 'ana'" in e.value.message
    ana.cancel(job.id)

    assert viewer.api_token.id in {t.id for t in admin.tokens()}
    assert admin.revoke_token(viewer.api_token.id).state == "revoked"
    with pytest.raises(AuthenticationError):
        as_viewer.whoami()
    with pytest.raises(PermissionDeniedError):
        ana.tokens()
    with pytest.raises(ConflictError, match="without CURVE"):
        admin.create_join_token()


def test_join_tokens_and_enrolled_workers_on_an_encrypted_farm() -> None:
    farm = LocalFarm("join", security="curve")
    try:
        farm.start_scheduler()
        admin = farm.client()
        joining = admin.create_join_token(note="spot fleet", ttl_s=3600, uses=2)
        assert joining.token.startswith("tsrj-") and joining.join_token.max_uses == 2
        assert joining.security == "curve" and joining.scheduler_public_key
        assert joining.join_token.id in {t.id for t in admin.join_tokens()}
        farm.start_worker("node-1", "--join-token", joining.token, "--public-key",
                          joining.scheduler_public_key)
        farm.wait_for_workers(1)
        assert admin.revoke_worker("node-1").action == "revoke"
        assert wait_for(lambda: admin.worker("node-1").state == "offline", 30)
        assert admin.readmit_worker("node-1").action == "readmit"
        assert admin.revoke_join_token(joining.join_token.id).state == "revoked"
    finally:
        farm.stop()


def test_bad_input_is_refused_with_the_apis_words(farm, tmp_path: Path) -> None:
    client = farm.client()
    before = len(client.jobs())
    with pytest.raises(InvalidArgumentError) as e:
        client.submit(noop("bad", frames="5-1"))
    assert e.value.status == 400 and e.value.field == "frames", e.value.message
    with pytest.raises(InvalidInputError, match="no such file"):
        client.submit(tmp_path / "missing.yaml")
    with pytest.raises(InvalidInputError, match="missing.png"):
        client.submit({**noop("asset"), "assets": ["missing.png"]}, base_dir=tmp_path)
    with pytest.raises(InvalidInputError, match="'..'"):
        client.submit(noop("escape"), files={"../up.png": str(tmp_path)})
    with pytest.raises(NotFoundError):
        client.job(10 ** 9)
    with pytest.raises(InvalidInputError):
        client.job(0)
    nowhere = Client(server=f"http://127.0.0.1:{free_port()}", token="tsra-x", timeout=5)
    with pytest.raises(UnreachableError) as e:
        nowhere.submit(noop("nowhere"))
    assert "connection refused" in str(e.value)
    with pytest.raises(InvalidInputError):
        Client(server="ftp://127.0.0.1:1")
    assert len(client.jobs()) == before


def test_a_cancelled_submit_creates_no_job(farm, tmp_path: Path) -> None:
    client = farm.client()
    before = len(client.jobs())
    big = tmp_path / "big.bin"
    big.write_bytes(b"\x01" * (20 << 20))  # three upload pieces
    cancel = threading.Event()

    def progress(p: SubmitProgress) -> None:
        if p.stage == "uploading" and p.bytes_done > 0:
            cancel.set()

    from tessera_client import CancelledError
    with pytest.raises(CancelledError):
        client.submit({**noop("cancelled"), "assets": ["big.bin"]}, base_dir=tmp_path,
                      progress=progress, cancel=cancel)
    assert len(client.jobs()) == before
    # The upload resumes where it stopped.
    sub = client.submit({**noop("resumed"), "assets": ["big.bin"]}, base_dir=tmp_path)
    assert sub.uploaded and client.wait(sub.job.id, timeout=30).succeeded
