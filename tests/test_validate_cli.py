"""`cronq validate` and `cronq schema`: exit codes, what goes to stdout and to stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cronq.cli import main

EXAMPLES = Path(__file__).parent.parent / "examples"
DATA = Path(__file__).parent / "data" / "config"


def run(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_valid_files_exit_0_with_a_summary() -> None:
    result = run("validate", str(EXAMPLES / "billing.yaml"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"ok: 3 jobs in 1 project ({EXAMPLES / 'billing.yaml'})\n"
    assert result.stderr == ""


def test_several_files_and_projects() -> None:
    result = run("validate", str(DATA / "billing.toml"), str(EXAMPLES / "hello.yaml"))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("ok: 4 jobs in 2 projects (")


def test_problems_exit_1_one_line_each_on_stderr(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  - name: a\n    schedule: '@daily'\n    timeout: 0s\n    rq: {}\n")
    result = run("validate", str(bad), str(tmp_path / "gone.toml"))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"{bad}:4: job a: timeout: must be longer than 0s",
        f"{bad}:5: job a: rq.func: required",
        f"{tmp_path / 'gone.toml'}: no such file",
    ]


def test_warnings_do_not_fail(tmp_path: Path) -> None:
    config = tmp_path / "w.yaml"
    config.write_text("jobs:\n  - name: feb30\n    schedule: '0 0 30 2 *'\n    noop: {}\n")
    result = run("validate", str(config))
    assert result.exit_code == 0
    assert result.stderr == f"warning: {config}:3: job feb30: schedule: never fires\n"
    assert result.stdout == f"ok: 1 job in 1 project ({config})\n"


def test_json_output(tmp_path: Path) -> None:
    good = run("validate", "--json", str(EXAMPLES / "billing.yaml"))
    assert good.exit_code == 0
    assert json.loads(good.stdout) == {
        "ok": True,
        "projects": [
            {
                "project": "billing",
                "file": str(EXAMPLES / "billing.yaml"),
                "jobs": ["billing/nightly-report", "billing/ping", "billing/once"],
            }
        ],
        "problems": [],
        "warnings": [],
    }
    bad = tmp_path / "bad.yaml"
    bad.write_text("jobs:\n  - name: a\n    start: soon\n    noop: {}\n")
    result = run("validate", "--json", str(bad))
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["ok"] is False and report["projects"] == []
    (problem,) = report["problems"]
    assert (problem["file"], problem["line"], problem["job"], problem["field"]) == (
        str(bad),
        3,
        "a",
        "start",
    )
    assert problem["text"].startswith(f"{bad}:3: job a: start: invalid duration 'soon'")


def test_validate_needs_a_path() -> None:
    assert run("validate").exit_code == 2


@pytest.mark.parametrize("command", ["validate", "schema"])
def test_help_has_an_example(command: str) -> None:
    result = run(command, "--help")
    assert result.exit_code == 0
    assert "Example" in result.stdout and f"cronq {command}" in result.stdout


def test_schema_is_json_schema_of_config_files() -> None:
    result = run("schema")
    assert result.exit_code == 0
    schema = json.loads(result.stdout)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert set(schema["properties"]) == {"project", "defaults", "jobs"}
    job = schema["$defs"]["JobSpec"]["properties"]
    assert {"name", "schedule", "timezone", "start", "until", "repeats", "overlap"} <= set(job)
    assert {"misfire", "failure_policy", "timeout", "payload", "rq", "http", "noop"} <= set(job)
    assert "dotted path" in schema["$defs"]["RqTarget"]["properties"]["func"]["description"]


def test_schema_is_valid_and_accepts_the_examples() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    yaml = pytest.importorskip("yaml")
    schema = json.loads(run("schema").stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for example in sorted(EXAMPLES.glob("*.yaml")):
        assert list(validator.iter_errors(yaml.safe_load(example.read_text()))) == []
    assert list(validator.iter_errors({"jobs": [{"name": "a", "schedul": "x"}]}))
