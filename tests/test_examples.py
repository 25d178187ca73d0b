"""The examples do what their comments and the README say, and the Docker files are valid.

Config examples are checked with `cronq validate`; `hello`, `rq_target` and `http` are applied to a
real server and fired by a real `cronq worker`; the decorator example is applied (dry run) by the
console script from the repository root, as its docstring says. docker-compose.yml is checked for
the facts the README states, its commands are parsed by cronq's own command line, and it is
validated against the official Compose Specification JSON schema when a package that ships it
(check-jsonschema vendors `compose-spec.json`) is installed.
"""

from __future__ import annotations

import copy
import glob
import http.server
import importlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, ClassVar

import pytest
import redis
import yaml
from click.testing import CliRunner, Result
from rq.job import Job

from cronq.cli import main
from cronq.loader import load_paths
from cronq.schedule import parse_schedule
from cronq.targets.rq import allowed, rq_job_id
from tests.engine_harness import Cronq, wait_until

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
CONFIGS = sorted(EXAMPLES.glob("*.yaml"))
COMPOSE_FILE = ROOT / "docker-compose.yml"
REDIS_IN_COMPOSE = "redis://redis:6379/0"


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args), catch_exceptions=False)


def load_example(name: str) -> Any:
    """The one project of examples/NAME, as `cronq apply` reads it."""
    result = load_paths([str(EXAMPLES / name)])
    assert result.ok, result.problems
    [project] = result.projects
    return project


@pytest.fixture
def fresh_myapp() -> Iterator[None]:
    """No `myapp` package cached in sys.modules before or after: examples/myapp and the
    README's myapp/jobs.py are two different packages of that name."""

    def forget() -> None:
        for name in [n for n in sys.modules if n == "myapp" or n.startswith("myapp.")]:
            del sys.modules[name]

    forget()
    yield
    forget()


# -- every example is valid ----------------------------------------------------------------------


def test_the_examples_the_readme_lists_exist() -> None:
    names = {path.name for path in CONFIGS}
    assert {"hello.yaml", "rq_target.yaml", "http.yaml", "billing.yaml"} <= names
    assert (EXAMPLES / "decorated.py").is_file()
    assert (EXAMPLES / "myapp" / "tasks.py").is_file()


@pytest.mark.parametrize("path", CONFIGS, ids=lambda path: path.name)
def test_example_config_validates_without_warnings(path: Path) -> None:
    result = cli("validate", str(path), "--json")
    report = json.loads(result.stdout)
    assert result.exit_code == 0, result.output
    assert report["ok"] and report["problems"] == [], report
    assert report["warnings"] == [], report


def test_hello_fires_every_few_seconds() -> None:
    [tick] = load_example("hello.yaml").jobs
    assert tick.job_id("hello") == "hello/tick"
    schedule = parse_schedule(tick.schedule, tick.timezone)
    moment = datetime(2027, 1, 1, 12, 0, 1, tzinfo=timezone.utc)
    for _ in range(30):
        following = schedule.next_after(moment)
        assert following is not None and following - moment <= timedelta(seconds=5)
        moment = following


def test_hello_points_at_its_history() -> None:
    """The next step after `cronq run` is written in the file, with the way to reach the
    embedded server."""
    text = (EXAMPLES / "hello.yaml").read_text()
    assert "cronq run --config examples/hello.yaml" in text
    assert "cronq history hello/tick" in text
    assert 'CRONQ_REDIS_URL="$(cat .cronq/url)"' in text


@pytest.mark.usefixtures("fresh_myapp")
def test_rq_example_function_runs_outside_rq_too(monkeypatch: pytest.MonkeyPatch) -> None:
    [greet] = load_example("rq_target.yaml").jobs
    assert greet.rq is not None and greet.rq.func == "myapp.tasks.greet"
    monkeypatch.syspath_prepend(str(EXAMPLES))
    module_name, _, function_name = greet.rq.func.rpartition(".")
    function = getattr(importlib.import_module(module_name), function_name)
    assert function(**greet.rq.kwargs) == "hello at None"


def test_decorated_example_applies_from_the_repository_root(redis_url: str) -> None:
    """As examples/decorated.py says: `cronq apply --module examples.decorated`, run by the
    console script (which, unlike `python -c`, does not put the current directory on sys.path)
    from the repository root, against a real server; a dry run writes nothing."""
    script = Path(sys.executable).with_name("cronq")
    command = str(script) if script.exists() else shutil.which("cronq")
    assert command, "the `cronq` console script is not installed"
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    argv = [command, "apply", "--module", "examples.decorated", "--dry-run", "--json"]
    result = subprocess.run(
        [*argv, "--redis-url", redis_url],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    [plan] = json.loads(result.stdout)["projects"]
    assert plan["project"] == "examples.decorated" and not plan["applied"]
    assert [(c["op"], c["job"]) for c in plan["changes"]] == [
        ("+", "examples.decorated/cleanup"),
        ("+", "examples.decorated/report"),
    ]
    with redis.Redis.from_url(redis_url) as connection:
        assert connection.keys("cronq:*") == []


# -- the examples fire on a real worker ----------------------------------------------------------


@pytest.fixture
def example_worker(harness: Cronq, monkeypatch: pytest.MonkeyPatch) -> Cronq:
    """A real `cronq worker -q default` that imports `myapp` from examples/, as rq_target.yaml
    says to run it."""
    path = os.pathsep.join(p for p in (str(EXAMPLES), os.environ.get("PYTHONPATH")) if p)
    monkeypatch.setenv("PYTHONPATH", path)
    harness.wait_ready([harness.start_worker("-q", "default")])
    return harness


def succeeded(harness: Cronq, job_id: str, *, manual: bool) -> list[dict[str, Any]]:
    runs = harness.runs(job_id, "SUCCEEDED")
    return [run for run in runs if bool(run.get("manual")) == manual]


def test_hello_and_rq_examples_fire(example_worker: Cronq) -> None:
    harness = example_worker
    for name in ("hello.yaml", "rq_target.yaml"):
        harness.cli_json("apply", str(EXAMPLES / name))
    assert harness.cli("trigger", "myapp/greet").exit_code == 0

    # hello/tick on its own schedule (every 5 s), myapp/greet at once through RQ's queue
    wait_until(
        lambda: succeeded(harness, "hello/tick", manual=False),
        timeout=15,
        what=f"a scheduled hello/tick run: {harness.logs()}",
    )
    [run, *_] = wait_until(
        lambda: harness.runs("myapp/greet", "SUCCEEDED"),
        timeout=15,
        what=f"myapp/greet to succeed: {harness.logs()}",
    )
    job = Job.fetch(rq_job_id(run["id"]), connection=harness.connection)
    scheduled_for = job.meta["cronq"]["scheduled_for"]
    assert job.return_value() == f"hello at {scheduled_for}"  # it read meta["cronq"]
    assert job.meta["cronq"]["payload"] == {"source": "examples/rq_target.yaml"}


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        type(self).seen.append(dict(self.headers))
        self.send_response(200)
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@pytest.fixture
def local_site() -> Iterator[list[dict[str, str]]]:
    """What examples/http.yaml pings: http://127.0.0.1:8000/ (the headers of each request)."""
    try:
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 8000), _Recorder)
    except OSError:
        pytest.skip("127.0.0.1:8000, the URL of examples/http.yaml, is in use")
    _Recorder.seen = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield _Recorder.seen
    finally:
        server.shutdown()
        server.server_close()


def test_http_example_fires(example_worker: Cronq, local_site: list[dict[str, str]]) -> None:
    harness = example_worker
    harness.cli_json("apply", str(EXAMPLES / "http.yaml"))
    assert harness.cli("trigger", "http/ping").exit_code == 0
    wait_until(
        lambda: harness.runs("http/ping", "SUCCEEDED"),
        timeout=15,
        what=f"http/ping to succeed: {harness.logs()}",
    )
    assert any(headers.get("X-Cronq-Job") == "http/ping" for headers in local_site)


# -- docker-compose.yml and the Dockerfile --------------------------------------------------------


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE_FILE.read_text())  # resolves the `<<: *cronq` merge keys
    assert isinstance(data, dict)
    return data


def command_of(service: dict[str, Any]) -> list[str]:
    """A service's command as argv; `sh -c "..."` is split the way the shell would."""
    command = service["command"]
    argv = shlex.split(command) if isinstance(command, str) else list(command)
    if argv[:2] == ["sh", "-c"]:
        argv = shlex.split(argv[2])
    return argv


def test_compose_runs_redis_with_persistence_and_a_healthcheck(compose: dict[str, Any]) -> None:
    redis_service = compose["services"]["redis"]
    assert redis_service["image"].split(":") == ["redis", "7"]
    assert " ".join(redis_service["command"]).find("--appendonly yes") >= 0
    [volume] = redis_service["volumes"]
    name, target = volume.split(":")[:2]
    assert target == "/data" and name in compose["volumes"]
    assert "ping" in redis_service["healthcheck"]["test"]


def test_compose_runs_two_workers_a_watchdog_and_a_one_shot_apply(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert set(services) >= {"redis", "worker", "watchdog", "apply"}
    worker = services["worker"]
    assert worker["deploy"]["replicas"] == 2
    assert command_of(worker) == [
        "cronq", "worker", "--redis-url", REDIS_IN_COMPOSE, "-q", "default"
    ]  # fmt: skip
    assert command_of(services["watchdog"])[:2] == ["cronq", "watchdog"]
    assert command_of(services["apply"])[:2] == ["cronq", "apply"]
    assert "/config/*.yaml" in command_of(services["apply"])
    assert services["apply"]["restart"] == "no"
    for name in ("worker", "watchdog", "apply"):
        service = services[name]
        assert service["build"] == "." and service["image"] == services["worker"]["image"]
        assert service["depends_on"]["redis"]["condition"] == "service_healthy"
        assert "./examples:/config:ro" in service["volumes"]
        assert service["environment"]["CRONQ_REDIS_URL"] == REDIS_IN_COMPOSE
        assert REDIS_IN_COMPOSE in command_of(service)


def test_compose_commands_are_valid_cronq_commands(compose: dict[str, Any]) -> None:
    """Each command parses with cronq's own options (an option renamed in the code fails
    here), and the apply glob finds the example files."""
    for name in ("worker", "watchdog", "apply"):
        argv = command_of(compose["services"][name])
        if name == "apply":
            pattern = next(arg for arg in argv if arg.startswith("/config/"))
            files = sorted(glob.glob(str(EXAMPLES / pattern.removeprefix("/config/"))))
            assert [Path(f) for f in files] == CONFIGS
            argv = [arg for arg in argv if arg != pattern] + files
        command = main.commands[argv[1]]
        with command.make_context(argv[1], argv[2:]) as context:
            assert context.params["redis_url"] == REDIS_IN_COMPOSE


def test_compose_workers_can_run_the_rq_example(
    compose: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workers import `myapp` from the mounted examples and allow exactly it."""
    environment = compose["services"]["worker"]["environment"]
    assert environment["PYTHONPATH"] == "/config"
    monkeypatch.setenv("CRONQ_ALLOWED_MODULES", environment["CRONQ_ALLOWED_MODULES"])
    [greet] = load_example("rq_target.yaml").jobs
    assert greet.rq is not None and greet.rq.queue == "default" and allowed(greet.rq.func)
    assert not allowed("billing.reports.nightly")


def _compose_schema() -> dict[str, Any]:
    """The official Compose Specification schema, as check-jsonschema vendors it."""
    vendor = pytest.importorskip(
        "check_jsonschema.builtin_schemas.vendor",
        reason="install check-jsonschema to validate against the Compose Specification schema",
    )
    path = Path(vendor.__file__).with_name("compose-spec.json")
    schema: dict[str, Any] = json.loads(path.read_text())
    return schema


def test_compose_file_follows_the_compose_specification(compose: dict[str, Any]) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = _compose_schema()
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(compose)]
    assert errors == []
    broken = copy.deepcopy(compose)
    broken["services"]["redis"]["healthchek"] = broken["services"]["redis"].pop("healthcheck")
    assert list(validator.iter_errors(broken)), "the schema must catch an unknown key"


def test_dockerfile_installs_cronq_and_runs_as_a_user() -> None:
    lines = [
        line.strip()
        for line in (ROOT / "Dockerfile").read_text().splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]
    assert lines[0] == "FROM python:3.12-slim"
    install = next(i for i, line in enumerate(lines) if line.startswith("RUN pip install ."))
    users = [i for i, line in enumerate(lines) if line.startswith("USER ")]
    assert users and users[-1] > install
    assert lines[users[-1]].split()[1] not in ("root", "0")
    copied = {part for line in lines if line.startswith("COPY ") for part in line.split()[1:-1]}
    ignored = {
        line.strip().rstrip("/")
        for line in (ROOT / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert copied and not copied & ignored, "the .dockerignore must keep what COPY needs"
    assert ".git" in ignored
