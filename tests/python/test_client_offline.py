"""The Python client without a farm: where it finds its server, token and CA; the farm's path
rule; that it covers every operation of docs/openapi.yaml; that it needs nothing outside the
standard library of Python 3.9."""

from __future__ import annotations

import ast
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from farm import CLIENT_DIR, REPO, require
from tessera_client import Client, InvalidInputError, models, resolve_connection
from tessera_client.errors import InvalidArgumentError, error_for_status
from tessera_client.paths import path_problem, safe_asset_name

# docs/openapi.yaml's operations and the Client method that calls each. The dashboard's own
# files are for browsers.
OPERATIONS = {
    "health": "health", "getBlobState": "submit", "putBlobPiece": "submit",
    "whoami": "whoami", "submitJob": "submit", "listJobs": "jobs", "getJob": "job",
    "deleteJob": "delete", "listJobTasks": "tasks", "cancelJob": "cancel", "pauseJob": "pause",
    "resumeJob": "resume", "setJobPriority": "set_priority", "retryJob": "retry",
    "rerenderFrames": "rerender", "listJobFrames": "frames", "listJobOutputs": "outputs",
    "getJobOutput": "fetch", "getFrameThumbnail": "thumbnail", "getTaskLog": "task_log",
    "whyTask": "why", "getHistory": "history", "getCosts": "costs",
    "getAutoscaler": "autoscaler", "streamEvents": "events", "listWorkers": "workers",
    "getWorker": "worker", "drainWorker": "drain_worker", "revokeWorker": "revoke_worker",
    "readmitWorker": "readmit_worker", "disableWorker": "disable_worker",
    "enableWorker": "enable_worker", "listPlugins": "plugins", "getSummary": "summary",
    "createJoinToken": "create_join_token", "listJoinTokens": "join_tokens",
    "revokeJoinToken": "revoke_join_token", "createApiToken": "create_token",
    "listApiTokens": "tokens", "revokeApiToken": "revoke_token", "getMetrics": "metrics",
    "listOpenJdEnvironments": "openjd_environments",
}
# Dataclasses and the schema of the objects they read.
SCHEMAS = {
    models.WhoAmI: "Whoami", models.Job: "Job", models.Task: "Task", models.TaskCounts:
    "TaskCounts", models.TaskAttempt: "TaskAttempt", models.TaskLog: "TaskLog",
    models.Why: "Why", models.Frame: "Frame", models.Worker: "Worker",
    models.WorkerAction: "WorkerAction", models.Plugin: "Plugin",
    models.PluginSetting: "PluginSetting", models.Summary: "Summary", models.Costs: "Costs",
    models.ApiToken: "ApiToken", models.NewApiToken: "ApiTokenCreated",
    models.JoinToken: "JoinToken", models.NewJoinToken: "JoinTokenCreated",
}


def openapi() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((REPO / "docs" / "openapi.yaml").read_text())


def test_every_api_operation_has_a_client_method() -> None:
    doc = openapi()
    seen = set()
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "put", "delete", "patch"):
                continue
            if op["operationId"].startswith("dashboard"):
                continue
            seen.add(op["operationId"])
            assert op["operationId"] in OPERATIONS, f"{method.upper()} {path} has no method"
            method_name = OPERATIONS[op["operationId"]]
            assert callable(getattr(Client, method_name, None)), method_name
            assert getattr(Client, method_name).__doc__, f"{method_name} has no docstring"
    assert seen == set(OPERATIONS)


def test_result_fields_are_the_schemas_properties() -> None:
    schemas = openapi()["components"]["schemas"]
    for cls, name in SCHEMAS.items():
        properties = set(schemas[name].get("properties", {}))
        fields = {f.name for f in dataclasses.fields(cls)} - {"raw"}
        assert fields <= properties, f"{cls.__name__}: {fields - properties} not in {name}"


def test_public_functions_have_docstrings() -> None:
    import tessera_client
    for name in tessera_client.__all__:
        obj = getattr(tessera_client, name)
        if callable(obj):
            assert obj.__doc__, name
    for name, member in vars(Client).items():
        if callable(member) and not name.startswith("_"):
            assert member.__doc__, f"Client.{name}"


def test_connection_comes_from_arguments_environment_then_config(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    (tmp_path / "token.txt").write_text("tsra-from-file\n")
    config.write_text("server: https://farm.example:8470\ntoken_file: token.txt\n"
                      "ca_file: ca.pem  # beside the file\n")
    env = {"TESSERA_CONFIG": str(config)}
    c = resolve_connection(environ=env)
    assert (c.server, c.token, c.ca_file) == ("https://farm.example:8470", "tsra-from-file",
                                             str(tmp_path / "ca.pem"))
    env.update(TESSERA_SERVER="http://env:1/", TESSERA_TOKEN="tsra-env")
    c = resolve_connection(environ=env)
    assert (c.server, c.token) == ("http://env:1", "tsra-env")
    c = resolve_connection(server="http://arg:2", token="tsra-arg", environ=env)
    assert (c.server, c.token) == ("http://arg:2", "tsra-arg")
    assert "tsra" not in repr(c)
    c = resolve_connection(environ={"HOME": str(tmp_path / "nohome")})
    assert (c.server, c.token) == ("http://127.0.0.1:8470", "")
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    (tmp_path / "xdg" / "tessera").mkdir(parents=True)
    (tmp_path / "xdg" / "tessera" / "config.yaml").write_text("token: tsra-xdg\n")
    assert resolve_connection(environ=env).token == "tsra-xdg"


def test_bad_config_and_token_files_name_the_file_and_key(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("server: http://x:1\nsecret: 1\n")
    with pytest.raises(InvalidInputError, match="secret: unknown key"):
        resolve_connection(environ={"TESSERA_CONFIG": str(config)})
    with pytest.raises(InvalidInputError, match="cannot read"):
        resolve_connection(environ={"TESSERA_CONFIG": str(tmp_path / "none.yaml")})
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(InvalidInputError, match="TESSERA_TOKEN_FILE: .* is empty"):
        resolve_connection(environ={"TESSERA_TOKEN_FILE": str(tmp_path / "empty")})


def test_api_errors_carry_status_code_message_and_field() -> None:
    e = error_for_status(400, "steps[1].frames: start 12 is after end 3", "invalid_argument")
    assert isinstance(e, InvalidArgumentError)
    assert (e.status, e.code, e.field) == (400, "invalid_argument", "steps[1].frames")
    assert error_for_status(403, "this needs the submitter role").field is None


def test_the_farms_path_rule() -> None:
    for bad in ("", "/etc/passwd", "../x", "a/../b", "a//b", "./a", "-rf", "a/-b", "a\\b",
                "a\x00b", "caf\u00e9.png", "x" * 513, ".."):
        assert path_problem(bad), bad
    for good in ("a.png", "shots/sh010/frame.0001.exr", "my file+v2.png", ".hidden"):
        assert path_problem(good) is None, good
    assert safe_asset_name("my tex (1).png") == "my tex _1_.png"
    assert path_problem(safe_asset_name("../-x")) is None


def test_the_client_runs_without_pyyaml(tmp_path: Path) -> None:
    """Inside a DCC's Python (no PyYAML) dict and JSON jobs work, and the config file is read;
    a YAML job file is refused with a message saying why."""
    (tmp_path / "config.yaml").write_text("server: 'http://127.0.0.1:9'\ntoken: tsra-t\n")
    (tmp_path / "job.yaml").write_text("name: y\nrenderer: noop\nframes: 1\n")
    script = f"""
import sys
sys.modules['yaml'] = None
sys.path.insert(0, {str(CLIENT_DIR)!r})
from tessera_client import resolve_connection, InvalidInputError
from tessera_client.submit import prepare_job
c = resolve_connection(environ={{'TESSERA_CONFIG': {str(tmp_path / 'config.yaml')!r}}})
assert (c.server, c.token) == ('http://127.0.0.1:9', 'tsra-t'), c
assert prepare_job({{'name': 'd', 'renderer': 'noop', 'frames': '1'}}).body['job_yaml']
try:
    prepare_job({str(tmp_path / 'job.yaml')!r})
except InvalidInputError as e:
    assert 'PyYAML' in str(e), e
else:
    raise SystemExit('a YAML file was read without PyYAML')
print('ok')
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_pip_installs_it_from_the_repository(tmp_path: Path) -> None:
    """`pip install scheduler/cli/python` (here offline: no build isolation) gives a package
    that imports from anywhere."""
    done = subprocess.run([sys.executable, "-m", "pip", "--version"], capture_output=True)
    require(done.returncode == 0, f"pip is not installed for {sys.executable} "
                                  "(apt-get install python3-pip)")
    source = tmp_path / "source"
    shutil.copytree(CLIENT_DIR, source, ignore=shutil.ignore_patterns("__pycache__", "build",
                                                                        "*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                           "--no-deps", "--no-index", "--target", str(tmp_path / "site"),
                           str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    check = subprocess.run([sys.executable, "-c", "import tessera_client; "
                            "print(tessera_client.__file__, tessera_client.__version__)"],
                           capture_output=True, text=True, cwd=tmp_path, timeout=60,
                           env={"PYTHONPATH": str(tmp_path / "site"), "PATH": "/usr/bin:/bin"})
    assert check.returncode == 0, check.stderr
    assert check.stdout.startswith(str(tmp_path / "site")), check.stdout


def test_the_client_is_python_39_syntax() -> None:
    for source in sorted((CLIENT_DIR / "tessera_client").glob("*.py")):
        ast.parse(source.read_text(), str(source), feature_version=(3, 9))
