#!/usr/bin/env python3
"""Open Job Description conformance suite through Tessera.

Runs the specification's conformance tests (openjd-specifications, conformance-tests/) the way
its own runner judges them, with Tessera in the place of the reference `openjd` CLI:

  * job_templates/, env_templates/: `tessera check FILE` must accept every file and refuse every
    `.invalid.` one;
  * jobs/*.test.yaml: each template is submitted to a local farm (a real scheduler and worker on
    loopback) with `tessera submit`, its parameters (-p file://), environment templates (--env)
    and path mapping rules (--path-mapping-rules); the output is what the submission printed and
    every task's log. A test passes when each `expected.output` line (or one of an `anyOf`)
    appears, no `forbidden` line does, and a `taskFailure` ended the job failed with the exit
    code asked for; an `.invalid.` test passes when the submission is refused or the job fails.
    Tests for another OS (runOn) are skipped, as upstream does.

Usage: run_conformance.py [--suite DIR] [--bin DIR] [PATTERN]
  DIR holds 2023-09/base/... (default: $OPENJD_CONFORMANCE_SUITE, else a copy of the suite
  beside the repository, ../shared/openjd-conformance); --bin holds tessera, tessera-scheduler
  and tessera-worker (default: the repository's build/bin).
  PATTERN (fnmatch) selects test files by name.
Exit status: 0 when every test passed, 1 otherwise, 77 when the suite folder is missing (the
test is skipped).

The farm is the suite's host: the reference CLI runs a job on the machine it is on and ignores
host requirements, while a farm schedules by them. So this farm's worker offers what the suite's
jobs ask for -- the programs they run (python, echo, bash), the tag value1 and the limits
licenses and the 100-character custom amount of the length tests -- and nothing else.
"""

import argparse
import fnmatch
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

try:
    import yaml
except ImportError:  # pragma: no cover - Debian's python3-yaml is installed by install-deps.sh
    print("run_conformance.py: PyYAML is missing (apt-get install python3-yaml)", file=sys.stderr)
    sys.exit(1)

SKIP = 77
JOB_TIMEOUT_S = 180
# amount.custom.<86 a's>: the suite's longest amount name (100 characters, the most there is).
LONG_AMOUNT = "a" * (100 - len("amount.custom."))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Farm:
    """A scheduler and one worker on loopback, in a temporary folder, stopped by PID."""

    def __init__(self, bin_dir: Path, work: Path):
        self.bin = bin_dir
        self.work = work
        self.api_port = free_port()
        self.broker_port = free_port()
        self.url = f"http://127.0.0.1:{self.api_port}"
        self.procs = []

    def start(self):
        config = self.work / "scheduler.yaml"
        config.write_text(yaml.safe_dump({
            "storage": {"data_dir": str(self.work / "data")},
            "api": {"listen": f"127.0.0.1:{self.api_port}", "auth": "none"},
            "broker": {"listen": f"tcp://127.0.0.1:{self.broker_port}", "security": "insecure"},
            "limits": {"licenses": 64, LONG_AMOUNT: 64},
        }))
        # `python` as the suite's templates name it: this machine's python3.
        programs = self.work / "programs"
        programs.mkdir()
        os.symlink(shutil.which("python3"), programs / "python")
        path = f"{programs}:{os.environ.get('PATH', '/usr/bin:/bin')}"
        log = open(self.work / "scheduler.log", "w")
        self.procs.append(subprocess.Popen(
            [str(self.bin / "tessera-scheduler"), "--config", str(config)],
            stdout=log, stderr=subprocess.STDOUT))
        worker_config = self.work / "worker.yaml"
        worker_config.write_text(yaml.safe_dump({
            "scheduler": {"address": f"tcp://127.0.0.1:{self.broker_port}"},
            "worker": {
            "name": "conformance",
            "data_dir": str(self.work / "worker"),
            "slots": 4,
            "plugin_path": path,
            "command_programs": ["python", "echo", "bash"],
            "tags": ["value1"],
        }}))
        log = open(self.work / "worker.log", "w")
        self.procs.append(subprocess.Popen(
            [str(self.bin / "tessera-worker"), "--config", str(worker_config)],
            stdout=log, stderr=subprocess.STDOUT))
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                workers = self.get("/api/v1/workers")["workers"]
                if any(w.get("state") not in ("offline", "dead", None) for w in workers):
                    return
            except OSError:
                pass
            time.sleep(0.2)
        logs = "".join(f"\n--- {name} ---\n" + (self.work / name).read_text(errors="replace")[-2000:]
                       for name in ("scheduler.log", "worker.log"))
        raise RuntimeError("the local farm did not start" + logs)

    def stop(self):
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=30) as reply:
            return json.load(reply)

    def wait(self, job_id: int):
        deadline = time.time() + JOB_TIMEOUT_S
        while time.time() < deadline:
            job = self.get(f"/api/v1/jobs/{job_id}")["job"]
            if job["state"] in ("done", "failed", "canceled"):
                return job
            time.sleep(0.2)
        return self.get(f"/api/v1/jobs/{job_id}")["job"]

    def logs(self, job: dict) -> str:
        out = []
        for step in job.get("steps") or [job]:
            tasks = self.get(f"/api/v1/jobs/{step['id']}/tasks")["tasks"]
            for task in tasks:
                log = self.get(f"/api/v1/tasks/{task['id']}/log")
                for attempt in log["attempts"]:
                    out.append(attempt.get("log") or "")
                    out.append(attempt.get("message") or "")
                out.append(log.get("message") or "")
        return "\n".join(out)


def load(path: Path):
    text = path.read_text(encoding="utf-8")
    return json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)


def check_templates(tessera: Path, folder: Path, pattern):
    passed, failed = 0, []
    files = sorted(list(folder.glob("*.yaml")) + list(folder.glob("*.json")))
    for f in files:
        if pattern and not fnmatch.fnmatch(f.name, pattern):
            continue
        r = subprocess.run([str(tessera), "check", str(f)], capture_output=True, text=True)
        expect_failure = ".invalid." in f.name
        ok = (r.returncode == 0) != expect_failure
        if ok:
            passed += 1
            print(f"  ✓ {f.name}", flush=True)
        else:
            failed.append(f.name)
            print(f"  ✗ {f.name}: expected {'refusal' if expect_failure else 'acceptance'}, got "
                  f"{(r.stdout + r.stderr).strip()[:300]}", flush=True)
    return passed, failed


def submit_job(tessera: Path, farm: Farm, test: dict, work: Path):
    """Submits one job test; returns (job id or None, what the submission printed)."""
    work.mkdir(parents=True)
    template = work / "template.yaml"
    template.write_text(yaml.safe_dump(test["template"], allow_unicode=True), encoding="utf-8")
    # No retries: a failed task ends its job, as a run of the reference CLI ends.
    cmd = [str(tessera), "submit", "--server", farm.url, "--max-retries", "0", str(template)]
    if "parameters" in test:
        params = work / "parameters.yaml"
        params.write_text(yaml.safe_dump(test["parameters"]), encoding="utf-8")
        cmd += ["-p", f"file://{params}"]
    for i, env in enumerate(test.get("environments", [])):
        path = work / f"env{i}.yaml"
        path.write_text(yaml.safe_dump(env, allow_unicode=True), encoding="utf-8")
        cmd += ["--env", str(path)]
    if "pathMapping" in test:
        rules = work / "pathmapping.json"
        rules.write_text(json.dumps({"version": "pathmapping-1.0",
                                     "path_mapping_rules": test["pathMapping"]}))
        cmd += ["--path-mapping-rules", str(rules)]
    # The submitter stands in the test's folder: relative PATH values are joined with it.
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=work)
    printed = r.stdout + r.stderr
    job_id = int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip().isdigit() else None
    return job_id, printed


def judge(test: dict, name: str, failed_run: bool, output: str):
    """Why the run does not pass (None when it passes), as upstream's runner judges it."""
    if ".invalid." in name:
        return None if failed_run else "expected the job refused or failed; it succeeded"
    expected = test.get("expected") or {}
    task_failure = expected.get("taskFailure")
    if task_failure is not None:
        if not failed_run:
            return "expected a task failure; the job succeeded"
        code = task_failure.get("exitCode")
        if code is not None:
            codes = [int(c) for c in re.findall(r"exited with code:\s*(-?\d+)", output)]
            first = next((c for c in codes if c != 0), None)
            if first != code:
                return f"expected exit code {code}, the failing action exited with {first}"
    elif failed_run:
        return "the job was refused or failed"
    lines = expected.get("output", []) + expected.get("output_posix", [])
    for line in lines:
        if isinstance(line, dict) and "anyOf" in line:
            if not any(alt in output for alt in line["anyOf"]):
                return f"missing any of {line['anyOf']}"
        elif line not in output:
            return f"missing {line!r}"
    for line in expected.get("forbidden", []) + expected.get("forbidden_posix", []):
        if line in output:
            return f"forbidden {line!r} appeared"
    return None


def run_jobs(tessera: Path, farm: Farm, folder: Path, pattern, work: Path):
    passed, failed, skipped = 0, [], 0
    submitted = []
    for f in sorted(folder.glob("*.test.yaml")):
        if pattern and not fnmatch.fnmatch(f.name, pattern):
            continue
        test = load(f)
        if test.get("runOn") is not None and "posix" not in test["runOn"]:
            skipped += 1
            print(f"  ⊘ {f.name} (not for posix)", flush=True)
            continue
        job_id, printed = submit_job(tessera, farm, test, work / f.name)
        submitted.append((f.name, test, job_id, printed))
    for name, test, job_id, printed in submitted:
        failed_run, output = True, printed
        if job_id is not None:
            job = farm.wait(job_id)
            output += "\n" + farm.logs(job)
            failed_run = job["state"] != "done"
            if job["state"] not in ("done", "failed", "canceled"):
                output += f"\n(the job was still {job['state']} after {JOB_TIMEOUT_S} s)"
        why = judge(test, name, failed_run, output)
        if why is None:
            passed += 1
            print(f"  ✓ {name}", flush=True)
        else:
            failed.append(name)
            print(f"  ✗ {name}: {why}\n    {output.strip()[-600:]}".replace("\n", "\n    "),
                  flush=True)
    return passed, failed, skipped


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    repo = Path(__file__).resolve().parents[2]
    parser.add_argument("--suite", default=os.environ.get("OPENJD_CONFORMANCE_SUITE") or
                        str(repo.parent / "shared" / "openjd-conformance"),
                        help="the conformance-tests folder")
    parser.add_argument("--bin", default=str(repo / "build" / "bin"))
    parser.add_argument("pattern", nargs="?", help="only test files matching this (fnmatch)")
    args = parser.parse_args()
    base = Path(args.suite) / "2023-09" / "base"
    if not base.is_dir():
        print(f"run_conformance.py: no OpenJD conformance suite at {args.suite}; skipped")
        return SKIP
    bin_dir = Path(args.bin).resolve()
    tessera = bin_dir / "tessera"
    totals = {"passed": 0, "failed": [], "skipped": 0}
    for kind in ("job_templates", "env_templates"):
        print(f"\n2023-09/base/{kind}:", flush=True)
        p, f = check_templates(tessera, base / kind, args.pattern)
        print(f"  {p} passed, {len(f)} failed")
        totals["passed"] += p
        totals["failed"] += [f"{kind}/{n}" for n in f]
    with tempfile.TemporaryDirectory(prefix="tessera-openjd-") as tmp:
        work = Path(tmp)
        farm = Farm(bin_dir, work)
        try:
            farm.start()
            print("\n2023-09/base/jobs:", flush=True)
            p, f, s = run_jobs(tessera, farm, base / "jobs", args.pattern, work / "jobs")
            print(f"  {p} passed, {len(f)} failed, {s} skipped")
            totals["passed"] += p
            totals["failed"] += [f"jobs/{n}" for n in f]
            totals["skipped"] += s
        finally:
            farm.stop()
            if totals["failed"]:
                for log in ("scheduler.log", "worker.log"):
                    text = (work / log).read_text(errors="replace") if (work / log).exists() else ""
                    print(f"\n--- {log} (last 3000 characters) ---\n{text[-3000:]}")
    print(f"\nTotal: {totals['passed']} passed, {len(totals['failed'])} failed, "
          f"{totals['skipped']} skipped (not for posix)")
    for name in totals["failed"]:
        print(f"  - {name}")
    return 0 if not totals["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
