"""The README tells the truth: its set-up commands are the ones CI runs, its config reference is
the config models' (every field, its default, valid examples), its CLI reference is the command
line's (every command and option, none invented), and its examples run."""

from __future__ import annotations

import io
import re
import shlex
import sys
import textwrap
from collections.abc import Iterator
from contextlib import redirect_stdout
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from click.testing import CliRunner
from pydantic import BaseModel

from cronq.cli import main
from cronq.config import ConfigFile, JobSpec, config_json_schema
from cronq.decorators import load_sources
from cronq.policies import ConstantRetry, CronRetry, ExponentialRetry
from cronq.target_specs import TARGET_KEYS, HttpTarget, NoopTarget, RqTarget

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
SETUP_COMMANDS = [
    "pip install -e . && cronq run --config examples/hello.yaml",
    "pip install -e '.[test]' && pytest",
]
_BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
_COMMENT = re.compile(r"\s+#.*$")


def code_blocks(text: str = README, language: str | None = None) -> list[str]:
    return [body for lang, body in _BLOCK.findall(text) if language in (None, lang)]


def commands_of(block: str) -> list[str]:
    """The command lines of a shell block, without prompts and trailing comments."""
    lines = (_COMMENT.sub("", line.removeprefix("$ ")).strip() for line in block.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def headings(text: str = README) -> list[tuple[int, int, str]]:
    """(offset, level, title) of every heading outside fenced code blocks."""
    found, fenced, offset = [], False, 0
    for line in text.splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (match := re.match(r"(#+) (.+)", line)):
            found.append((offset, len(match[1]), match[2].strip()))
        offset += len(line)
    return found


def section(title: str, text: str = README) -> str:
    """The text under the heading `title` (any level) up to the next heading of that level or
    higher."""
    marks = headings(text)
    starts = [i for i, (_, _, name) in enumerate(marks) if name == title]
    assert starts, f"no section {title!r} in the README"
    offset, level, _ = marks[starts[0]]
    following = [start for start, depth, _ in marks[starts[0] + 1 :] if depth <= level]
    return text[offset : following[0] if following else len(text)].split("\n", 1)[1]


def table_after(marker: str) -> list[list[str]]:
    """The rows (cells stripped) of the Markdown table that follows `marker`."""
    start = README.index(marker) + len(marker)
    rows = []
    for line in README[start:].lstrip("\n").splitlines():
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1]])
    assert len(rows) > 2, f"no table after {marker}"
    return rows[2:]  # past the header and the separator


def literals(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


# -- the two set-up commands -----------------------------------------------------------------------


def test_the_first_code_block_is_the_two_setup_commands() -> None:
    assert commands_of(code_blocks()[0]) == SETUP_COMMANDS


def test_ci_runs_exactly_the_readme_test_command() -> None:
    """.ci/run's last command is the README's test command, verbatim, and nothing else in it
    runs the tests."""
    lines = commands_of((ROOT / ".ci" / "run").read_text())
    assert lines[-1] == SETUP_COMMANDS[1]
    assert [line for line in lines if "pytest" in line] == [SETUP_COMMANDS[1]]


# -- the config reference --------------------------------------------------------------------------

MODELS: dict[str, type[BaseModel]] = {
    "ConfigFile": ConfigFile,
    "JobSpec": JobSpec,
    "RqTarget": RqTarget,
    "HttpTarget": HttpTarget,
    "NoopTarget": NoopTarget,
    "ConstantRetry": ConstantRetry,
    "CronRetry": CronRetry,
    "ExponentialRetry": ExponentialRetry,
}
MINIMAL: dict[str, dict[str, Any]] = {
    "ConfigFile": {"jobs": []},
    "JobSpec": {"name": "job", "schedule": "@daily", "noop": {}},
    "RqTarget": {"func": "myapp.tasks.run"},
    "HttpTarget": {"url": "http://127.0.0.1:8000/"},
    "NoopTarget": {},
    "ConstantRetry": {"delay": "1s"},
    "CronRetry": {"schedule": "@daily"},
    "ExponentialRetry": {},
}


def minimal(model: str, field: str) -> dict[str, Any]:
    """The smallest valid data for `model`, without `field` (and, to try a target, without
    the other target)."""
    data = {key: value for key, value in MINIMAL[model].items() if key != field}
    if model == "JobSpec" and field in TARGET_KEYS:
        data.pop("noop", None)
        data.setdefault(field, None)
    return data


def schema_of(model: str) -> dict[str, Any]:
    schema = config_json_schema()
    found: dict[str, Any] = schema if model == "ConfigFile" else schema["$defs"][model]
    return found


def value_of(model: str, field: str, value: Any) -> Any:
    built = getattr(MODELS[model].model_validate({**minimal(model, field), field: value}), field)
    if model == "JobSpec" and field == "failure_policy":
        return built.retry  # `drop` and the default both retry nothing
    return built


@pytest.mark.parametrize("model", sorted(MODELS))
def test_config_table_lists_every_field_of_the_schema(model: str) -> None:
    rows = table_after(f"<!-- fields: {model} -->")
    documented = [literals(row[0])[0] for row in rows]
    assert sorted(documented) == sorted(schema_of(model)["properties"])


@pytest.mark.parametrize("model", sorted(MODELS))
def test_config_table_defaults_are_the_models(model: str) -> None:
    """`required`, `—` (none), a literal (the same value as the model's default once read), or
    words (a default computed elsewhere, e.g. the project from the file name)."""
    required = set(schema_of(model).get("required", []))
    for row in table_after(f"<!-- fields: {model} -->"):
        field, default = literals(row[0])[0], row[1]
        info = MODELS[model].model_fields[field]
        if default == "required":
            assert field in required, f"{model}.{field} is not required"
            continue
        assert field not in required, f"{model}.{field} is required"
        if default.startswith("`"):
            [text] = literals(default)
            expected = getattr(MODELS[model].model_validate(minimal(model, field)), field)
            if model == "JobSpec" and field == "failure_policy":
                expected = expected.retry
            assert value_of(model, field, yaml.safe_load(text)) == expected, (model, field)
        else:
            assert info.default is None and info.default_factory is None, (model, field)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_config_table_examples_are_valid(model: str) -> None:
    for row in table_after(f"<!-- fields: {model} -->"):
        field = literals(row[0])[0]
        for text in literals(row[2]):
            value_of(model, field, yaml.safe_load(text))


def test_config_file_example_validates(tmp_path: Path) -> None:
    block = code_blocks(section("Config reference"), "yaml")[0]
    path = tmp_path / "billing.yaml"
    path.write_text(block)
    result = CliRunner().invoke(main, ["validate", str(path)])
    assert result.exit_code == 0, result.output


def test_failure_policy_examples_validate() -> None:
    block = code_blocks(section("Failure policies"), "yaml")[0]
    for line in commands_of(block):
        policy = yaml.safe_load(line)["failure_policy"]
        JobSpec.model_validate({**MINIMAL["JobSpec"], "failure_policy": policy})


# -- the CLI reference -----------------------------------------------------------------------------

COMMON = section("Common options, environment, exit codes")


def option_names(command: click.Command) -> set[str]:
    names = set()
    for param in command.params:
        if isinstance(param, click.Option):
            names.update(param.opts + param.secondary_opts)
    return names - {"-h", "--help"}


def mentions(text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", text) is not None


def test_every_command_has_a_section_with_every_option() -> None:
    reference = section("CLI reference")
    for name, command in main.commands.items():
        text = section(f"`cronq {name}`", reference)
        for option in option_names(command):
            common = option in ("--redis-url", "--namespace") and mentions(COMMON, option)
            assert mentions(text, option) or common, f"cronq {name} {option} is not documented"
    assert mentions(reference, "--version")


def test_the_cli_reference_invents_no_command_or_option() -> None:
    reference = section("CLI reference")
    for name in re.findall(r"^### `cronq (\S+)`", reference, re.MULTILINE):
        assert name in main.commands, f"`cronq {name}` is not a command"
        text = section(f"`cronq {name}`", reference)
        for line in text.splitlines():
            if line.startswith("| `-"):
                for token in re.findall(r"(?<![\w-])(--?[a-z][\w-]*)", line.split("|")[1]):
                    assert token in option_names(main.commands[name]), f"cronq {name} {token}"
    for line in COMMON.splitlines():
        if line.startswith("| `--"):
            assert re.findall(r"--[a-z-]+", line)[0] in option_names(main.commands["apply"])


def test_every_environment_variable_is_documented() -> None:
    in_code = {
        name
        for path in (ROOT / "cronq").rglob("*.py")
        for name in re.findall(r"\bCRONQ_[A-Z_]+\b", path.read_text())
    }
    in_readme = set(re.findall(r"\bCRONQ_[A-Z_]+\b", README))
    assert in_code == in_readme


def test_exit_codes_are_as_documented() -> None:
    assert "**0** success, **1** a problem with the input or the job" in COMMON
    assert "**2** bad usage" in COMMON
    runner = CliRunner()
    assert runner.invoke(main, ["next", "@daily"]).exit_code == 0
    assert runner.invoke(main, ["next", "*/0 * * * *"]).exit_code == 1
    assert runner.invoke(main, ["next"]).exit_code == 2
    assert runner.invoke(main, ["next", "@daily", "--no-such-option"]).exit_code == 2


def test_every_cronq_command_line_in_the_readme_parses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # paths in the examples are relative to the repository root
    seen = 0
    for block in code_blocks(language="sh") + code_blocks(language="console"):
        for line in commands_of(block):
            for part in line.removesuffix("&").split("&&"):
                argv = shlex.split(part)
                if argv[:1] != ["cronq"]:
                    continue
                seen += 1
                assert argv[1] in main.commands, line
                with main.commands[argv[1]].make_context(argv[1], argv[2:]):
                    pass
    assert seen >= 10


def test_next_example_prints_what_the_readme_shows() -> None:
    block = code_blocks(section("Schedules"), "console")[0]
    command, *shown = block.strip().splitlines()
    argv = shlex.split(command.removeprefix("$ "))
    assert argv[0] == "cronq"
    result = CliRunner().invoke(main, argv[1:])
    assert result.exit_code == 0 and result.stdout.splitlines() == shown


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


# -- the Python API and the decorator --------------------------------------------------------------


def test_python_api_example_runs(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    block = code_blocks(section("Python API"), "python")[0]
    assert '"redis://127.0.0.1:6379/0"' in block
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    with redirect_stdout(out):
        exec(compile(block.replace("redis://127.0.0.1:6379/0", redis_url), "README", "exec"), {})
    assert re.search(r"\['billing/ping'\] \S*SCHEDULED", out.getvalue()), out.getvalue()


@pytest.mark.usefixtures("fresh_myapp")
def test_decorator_example_applies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    block = code_blocks(section("The decorator"), "python")[0]
    package = tmp_path / "myapp"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "jobs.py").write_text(textwrap.dedent(block))
    monkeypatch.syspath_prepend(str(tmp_path))
    result = load_sources([], ["myapp.jobs"])
    assert result.ok, result.problems
    [project] = result.projects
    assert project.name == "myapp.jobs"
    targets = {job.name: (job.rq.func, job.rq.queue) for job in project.jobs if job.rq}
    assert targets == {
        "cleanup": ("myapp.jobs.cleanup", "default"),
        "report": ("myapp.jobs.build_report", "reports"),
    }


# -- links -----------------------------------------------------------------------------------------


def slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_links_point_at_files_and_headings_that_exist() -> None:
    anchors = {slug(title) for _, _, title in headings()}
    for target in re.findall(r"\]\(([^)\s]+)\)", README):
        if target.startswith("#"):
            assert target[1:] in anchors, target
        elif "://" not in target:
            assert (ROOT / target).exists(), target
