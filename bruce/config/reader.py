"""The hardened YAML reader behind ``config.yml`` (and eval case files), and ``${VAR}`` expansion.

The file is read as UTF-8 (``decode``) by a ``yaml.SafeLoader`` that also refuses what would
otherwise hang, trace or be silently ignored: duplicate keys, nesting deeper than ``MAX_DEPTH``,
more than ``MAX_ALIASES`` alias uses, a document that expands (through aliases) to more than
``MAX_NODES`` values, and an alias that refers to itself; each refusal names the key path and the
line. ``expand`` then replaces ``${VAR}`` and ``${VAR:-default}`` with the environment's values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import yaml

from bruce.config.messages import key_path
from bruce.errors import ConfigError

__all__ = ["MAX_ALIASES", "MAX_DEPTH", "MAX_NODES", "decode", "expand", "parse_yaml"]

MAX_DEPTH = 32  # mappings and lists inside each other; Bruce's own keys go 4 deep
MAX_ALIASES = 20  # *alias uses in one file: enough to share a list, far too few for a bomb
MAX_NODES = 50_000  # values in the document once every alias is expanded

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


def expand(value: Any, environ: Mapping[str, str]) -> Any:
    """``value`` with each ``${VAR}`` (``${VAR:-default}``) in its texts read from ``environ``; an
    unset or empty variable gives its default, else nothing, as the shell does."""
    if isinstance(value, str):
        return _VAR.sub(lambda m: environ.get(m.group(1)) or m.group(2) or "", value)  # empty: the default
    if isinstance(value, list):
        return [expand(v, environ) for v in value]
    if isinstance(value, dict):
        return {k: expand(v, environ) for k, v in value.items()}
    return value


class _Refused(yaml.YAMLError):
    """A document the loader will not build: ``where`` is the key path, ``mark`` the place."""

    def __init__(self, where: str, problem: str, mark: Any) -> None:
        self.where, self.problem, self.mark = where, problem, mark
        super().__init__(problem)

    def describe(self) -> str:
        line = f" at line {self.mark.line + 1}" if self.mark is not None else ""
        return f"{self.where or '<root>'}: {self.problem}{line}"


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that keeps track of the key path while composing, and refuses duplicate keys,
    deep nesting, alias bombs and self-referring aliases before anything is constructed."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str | int] = []
        self._aliases = 0
        self._open_anchors: set[str] = set()
        self._weights: dict[int, int] = {}  # id(node) -> values it expands to

    def _where(self) -> str:
        text = key_path(self._path)
        return text if len(text) <= 120 else text[:117] + "..."

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if parent is not None:
            if isinstance(index, yaml.ScalarNode):
                self._path.append(str(index.value))
            elif isinstance(index, int):
                self._path.append(index)  # a list position, shown as [i]
            else:
                self._path.append("<key>")
        try:
            return self._compose_checked()
        finally:
            if parent is not None:
                self._path.pop()

    def _compose_checked(self) -> yaml.Node | None:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            self._aliases += 1
            if self._aliases > MAX_ALIASES:
                raise _Refused(self._where(), f"more than {MAX_ALIASES} aliases (*name) in one file", event.start_mark)
            if event.anchor in self._open_anchors:
                raise _Refused(self._where(), f"the alias *{event.anchor} refers to itself", event.start_mark)
            return super().compose_node(None, None)  # type: ignore[arg-type]
        if len(self._path) > MAX_DEPTH:
            raise _Refused(self._where(), f"nested more than {MAX_DEPTH} levels deep", event.start_mark)
        anchor = getattr(event, "anchor", None)
        if anchor is not None:
            self._open_anchors.add(anchor)
        try:
            node = super().compose_node(None, None)  # type: ignore[arg-type]
        finally:
            if anchor is not None:
                self._open_anchors.discard(anchor)
        if isinstance(node, yaml.MappingNode):
            self._refuse_duplicates(node)
        if node is not None:
            self._weigh(node)
        return node

    def _refuse_duplicates(self, node: yaml.MappingNode) -> None:
        seen: dict[tuple[str, str], yaml.Node] = {}
        for key, _ in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            first = seen.setdefault((key.tag, key.value), key)
            if first is not key:
                where = key_path([*self._path, str(key.value)])
                raise _Refused(where, f"duplicate key at {_place(key, first)} (first at {_place(first, key)})", None)

    def _weigh(self, node: yaml.Node) -> None:
        if isinstance(node, yaml.MappingNode):
            children = [n for pair in node.value for n in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            children = []
        weight = 1 + sum(self._weights.get(id(child), 1) for child in children)
        self._weights[id(node)] = weight
        if weight > MAX_NODES:
            raise _Refused(self._where(), f"expands to more than {MAX_NODES} values (through aliases?)",
                           node.start_mark)


def _place(node: yaml.Node, other: yaml.Node) -> str:
    """``line N``, with the column when ``other`` is on the same line."""
    mark = node.start_mark
    if mark.line == other.start_mark.line:
        return f"line {mark.line + 1}, column {mark.column + 1}"
    return f"line {mark.line + 1}"


def decode(raw: bytes) -> str:
    """The file as text, or ConfigError at the first byte that is not UTF-8."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigError(f"not valid UTF-8 text at line {line}, column {column} (byte 0x{raw[exc.start]:02x}); "
                          "save the file as UTF-8") from None


def _yaml_problem(exc: yaml.YAMLError, text: str) -> str:
    if isinstance(exc, _Refused):
        return exc.describe()
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        said = "; ".join(p for p in (getattr(exc, "context", None), getattr(exc, "problem", None)) if p)
        return f"not valid YAML at line {mark.line + 1}, column {mark.column + 1}" + (f": {said}" if said else "")
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow (NUL, a control code)
        line = text.count("\n", 0, exc.position) + 1
        return f"not valid YAML at line {line}: character U+{exc.character:04X} is not allowed"
    return "not valid YAML"


def parse_yaml(text: str) -> Any:
    """The YAML document in ``text`` (SafeLoader types), or ConfigError saying where it is wrong."""
    try:
        loader = _StrictLoader(text)  # the reader refuses characters YAML does not allow here
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_problem(exc, text)) from None
    try:
        return loader.get_single_data()
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_problem(exc, text)) from None
    finally:
        loader.dispose()
