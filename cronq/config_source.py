"""Reading a config file into plain data plus the line of every key, for problem messages.

YAML is composed into nodes (safe: no tags beyond the standard scalar and collection ones) and
built by hand, which gives every key's line and lets duplicate keys, odd keys and alias bombs be
refused instead of silently accepted. Timestamps stay text: `start` parses them itself, with the
offset RFC 3339 requires.

TOML is parsed by `tomllib`, which has no positions; lines come from a light scan of the text:
`[[jobs]]` / `[table]` headers and `key =` lines (dotted and quoted keys too). It is best effort:
keys inside inline tables (`rq = {func = "x"}`) point at the line of the table, and problems in
`jobs = [{...}]` arrays at the line of `jobs`.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

from cronq.config_problems import Loc

__all__ = ["CONFIG_SUFFIXES", "MAX_FILE_BYTES", "Source", "SourceIssue", "read_source"]

CONFIG_SUFFIXES = (".yaml", ".yml", ".toml")
MAX_FILE_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000  # after expanding YAML aliases: a "billion laughs" file stops here
MAX_DEPTH = 64


@dataclass(frozen=True)
class SourceIssue:
    """A problem found while reading, before any validation."""

    loc: Loc
    line: int | None
    message: str


@dataclass
class Source:
    """What a file holds (`data` is None when it could not be read at all) and where."""

    data: object = None
    lines: dict[Loc, int] = field(default_factory=dict)
    issues: list[SourceIssue] = field(default_factory=list)

    def line_of(self, loc: Loc) -> int | None:
        """The line of `loc`, or of its nearest enclosing key that has one."""
        for end in range(len(loc), -1, -1):
            line = self.lines.get(loc[:end])
            if line is not None:
                return line
        return None


def read_source(path: Path) -> Source:
    """Read and parse one file; every failure is an issue, never an exception."""
    try:
        if path.is_dir():
            return _fail("is a directory; give the config files in it")
        if not path.exists():
            return _fail("no such file")
        if path.suffix.lower() not in CONFIG_SUFFIXES:
            return _fail(f"not a config file: expected {', '.join(CONFIG_SUFFIXES)}")
        if path.stat().st_size > MAX_FILE_BYTES:
            return _fail(f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB")
        raw = path.read_bytes()
    except OSError as exc:
        return _fail(f"cannot read: {exc.strerror or exc}")
    if b"\0" in raw:
        return _fail("binary file, not YAML or TOML text")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        return _fail(f"not UTF-8 text (byte 0x{raw[exc.start]:02x})", line)
    if not text.strip():
        return _fail("empty file; a config file needs at least `jobs:`", 1)
    try:
        return _read_toml(text) if path.suffix.lower() == ".toml" else _read_yaml(text)
    except RecursionError:
        return _fail(f"nested deeper than {MAX_DEPTH} levels", 1)


def _fail(message: str, line: int | None = None) -> Source:
    return Source(issues=[SourceIssue((), line, message)])


# --- YAML ---------------------------------------------------------------------------------------

_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_TAG}{name}" for name in ("str", "int", "float", "bool", "null")}
_TIMESTAMP = f"{_TAG}timestamp"
_MERGE = f"{_TAG}merge"


class _Stop(Exception):
    """Building stops: the document is too big or too deep to be a config file."""

    def __init__(self, node: Node, message: str) -> None:
        super().__init__(message)
        self.line = node.start_mark.line + 1


def _read_yaml(text: str) -> Source:
    try:
        loader = yaml.SafeLoader(text)
    except yaml.reader.ReaderError as exc:
        return _reader_error(text, exc)
    try:
        node = loader.get_single_node()
        if node is None:
            return _fail("empty file (only comments); a config file needs at least `jobs:`", 1)
        builder = _YamlBuilder(loader)
        data = builder.build(node, (), 0)
        return Source(data, builder.lines, builder.issues)
    except yaml.MarkedYAMLError as exc:
        return _fail(_yaml_message(exc), exc.problem_mark.line + 1 if exc.problem_mark else None)
    except yaml.reader.ReaderError as exc:
        return _reader_error(text, exc)
    except yaml.YAMLError as exc:
        return _fail(f"YAML error: {exc}")
    except _Stop as exc:
        return _fail(str(exc), exc.line)
    finally:
        loader.dispose()


def _reader_error(text: str, exc: yaml.reader.ReaderError) -> Source:
    """YAML refuses control characters; say which one and where, not at which offset."""
    line = text[: exc.position].count("\n") + 1
    character = exc.character if isinstance(exc.character, int) else ord(exc.character or "?")
    return _fail(f"YAML does not allow the character U+{character:04X}", line)


def _yaml_message(exc: yaml.MarkedYAMLError) -> str:
    message = f"YAML syntax error: {exc.problem or exc.context or 'invalid'}"
    if "alias" in f"{exc.context} {exc.problem}":
        message += ' (quote cron expressions: schedule: "*/5 * * * *")'
    return message


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


class _YamlBuilder:
    """Nodes to plain data, recording lines and refusing what a config file has no use for."""

    def __init__(self, loader: yaml.SafeLoader) -> None:
        self.loader = loader
        self.lines: dict[Loc, int] = {}
        self.issues: list[SourceIssue] = []
        self.budget = MAX_NODES

    def build(self, node: Node, path: Loc, depth: int) -> object:
        self.budget -= 1
        if self.budget < 0:
            raise _Stop(node, f"more than {MAX_NODES} values (after expanding aliases)")
        if depth > MAX_DEPTH:
            raise _Stop(node, f"nested deeper than {MAX_DEPTH} levels")
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, ScalarNode):
            return self._scalar(node, path)
        if node.tag not in (f"{_TAG}seq", f"{_TAG}map"):
            self._issue(path, node, f"YAML tag {_short_tag(node.tag)} is not supported")
        if isinstance(node, SequenceNode):
            return [
                self.build(item, (*path, index), depth + 1) for index, item in enumerate(node.value)
            ]
        assert isinstance(node, MappingNode)
        return self._mapping(node, path, depth)

    def _scalar(self, node: ScalarNode, path: Loc) -> object:
        if node.tag == _TIMESTAMP:
            return node.value
        if node.tag not in _SCALAR_TAGS:
            self._issue(path, node, f"YAML tag {_short_tag(node.tag)} is not supported")
            return node.value
        return self.loader.construct_object(node)

    def _mapping(self, node: MappingNode, path: Loc, depth: int) -> dict[str, object]:
        result: dict[str, object] = {}
        merges: list[Node] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merges.append(value_node)
                continue
            if not isinstance(key_node, ScalarNode):
                self._issue(path, key_node, "a key must be text, not a list or a mapping")
                continue
            key = str(key_node.value)
            loc = (*path, key)
            if key in result:
                first = self.lines.get(loc)
                self._issue(loc, key_node, f"duplicate key (first at line {first})")
                continue
            self.lines[loc] = key_node.start_mark.line + 1
            result[key] = self.build(value_node, loc, depth + 1)
        for merge in merges:
            self._merge(result, merge, path, depth)
        return result

    def _merge(self, result: dict[str, object], node: Node, path: Loc, depth: int) -> None:
        """`<<: *base` (or a list of them): keys of the mapping that this one does not have."""
        sources = node.value if isinstance(node, SequenceNode) else [node]
        for source in sources:
            if not isinstance(source, MappingNode):
                self._issue(path, source, "`<<` merges a mapping or a list of mappings")
                continue
            outer, self.lines = self.lines, {}
            merged = self._mapping(source, path, depth)
            merged_lines, self.lines = self.lines, outer
            for key, value in merged.items():
                result.setdefault(key, value)
            for loc, line in merged_lines.items():
                self.lines.setdefault(loc, line)

    def _issue(self, path: Loc, node: Node, message: str) -> None:
        self.issues.append(SourceIssue(path, node.start_mark.line + 1, message))


# --- TOML ---------------------------------------------------------------------------------------

_TOML_POSITION = re.compile(r"\s*\(at line (\d+), column \d+\)|\s*\(at end of document\)")
_STRINGS = re.compile(r'"""(?:.|\n)*?"""|\'\'\'(?:.|\n)*?\'\'\'|"(?:[^"\\]|\\.)*"|\'[^\']*\'')
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_QUOTED = r'"(?:[^"\\]|\\.)*"|\'[^\']*\''
_KEY_PART = re.compile(rf"\s*({_QUOTED}|[^.\s]+)\s*")
_KEY = re.compile(rf"\s*((?:{_QUOTED}|[A-Za-z0-9_.\s-])+)=")
_HEADER = re.compile(r"\s*\[\[?(.*?)\]\]?\s*(?:#.*)?$")


def _read_toml(text: str) -> Source:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        match = re.search(r"\(at line (\d+)", message)
        line = int(match[1]) if match else None
        if line is None and "end of document" in message:
            line = text.count("\n") + 1
        return _fail(f"TOML syntax error: {_TOML_POSITION.sub('', message)}", line)
    return Source(data, _toml_lines(text))


def _toml_lines(text: str) -> dict[Loc, int]:
    """Lines of `[[array]]` / `[table]` headers and of `key = ` lines, by a scan of the text."""
    lines: dict[Loc, int] = {(): 1}
    arrays: dict[tuple[str, ...], int] = {}
    table: Loc = ()
    open_string: str | None = None
    depth = 0  # brackets still open from a multi-line array or inline table
    for number, raw in enumerate(text.splitlines(), 1):
        if open_string is not None:
            if open_string not in raw:
                continue
            raw = raw.split(open_string, 1)[1]
            open_string = None
        code = _STRINGS.sub('""', raw).split("#", 1)[0]
        for quote in ('"""', "'''"):
            if quote in code:
                open_string = quote
                code = code.split(quote, 1)[0]
        if depth > 0:
            depth = max(0, depth + _balance(code))
            continue
        stripped = code.strip()
        if stripped.startswith("["):
            header = _HEADER.match(raw)
            names = _key_parts(header[1]) if header else None
            if names is None:
                continue
            if stripped.startswith("[["):
                arrays[tuple(names)] = arrays.get(tuple(names), 0) + 1
            table = _table_loc(names, arrays)
            _set_line(lines, table, number)
            continue
        if "=" in stripped:
            key_text = _KEY.match(raw)
            key = _key_parts(key_text[1]) if key_text else None
            if key is not None:
                _set_line(lines, (*table, *key), number)
            depth = max(0, _balance(code.split("=", 1)[1]))
    return lines


def _set_line(lines: dict[Loc, int], loc: Loc, number: int) -> None:
    """The line of `loc` and of each enclosing key not seen yet (`[jobs.rq]`, `http.url = `)."""
    for end in range(1, len(loc) + 1):
        lines.setdefault(loc[:end], number)


def _balance(code: str) -> int:
    return code.count("[") + code.count("{") - code.count("]") - code.count("}")


def _table_loc(names: list[str], arrays: dict[tuple[str, ...], int]) -> Loc:
    loc: Loc = ()
    for end in range(1, len(names) + 1):
        loc = (*loc, names[end - 1])
        count = arrays.get(tuple(names[:end]))
        if count:
            loc = (*loc, count - 1)
    return loc


def _key_parts(text: str) -> list[str] | None:
    """`a.b`, `a . "b.c"` → ['a', 'b'], ['a', 'b.c']; None if it is not a TOML key."""
    parts: list[str] = []
    for piece in _KEY_PART.findall(text):
        if piece.startswith(('"', "'")):
            parts.append(piece[1:-1])
        elif _BARE_KEY.fullmatch(piece):
            parts.append(piece)
        elif piece:
            return None
    return parts or None
