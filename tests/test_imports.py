"""Imports go one way (STYLE.md, habit 4), read from the source with ``ast``, nothing imported:

- no import cycle among ``bruce/``, ``channels/`` and ``tools/``: not among the imports a
  module runs when it is imported (its top level; ``if TYPE_CHECKING:`` blocks excluded), and
  not even counting the imports functions make when they run;
- ``bruce/`` names ``channels`` or ``tools`` only in ``bruce/app.py``, the assembly.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bruce", "channels", "tools")
ASSEMBLY = "bruce.app"


@dataclass(frozen=True, slots=True)
class Import:
    target: str  # a module name, or module.name for ``from module import name``
    line: int
    in_function: bool


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imports_of(name: str, path: Path, *, type_checking: bool = False) -> Iterator[Import]:
    """Every import statement of the module; ``type_checking``: those under TYPE_CHECKING too."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]

    def walk(nodes: list[ast.stmt], in_function: bool) -> Iterator[Import]:
        for node in nodes:
            if isinstance(node, ast.If) and _is_type_checking(node):
                if type_checking:
                    yield from walk(node.body, in_function)
                yield from walk(node.orelse, in_function)
                continue
            if isinstance(node, ast.Import):
                yield from (Import(alias.name, node.lineno, in_function) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                yield Import(base, node.lineno, in_function)
                yield from (Import(f"{base}.{alias.name}", node.lineno, in_function) for alias in node.names)
            inner = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    yield from walk([child], inner)
                elif isinstance(child, ast.excepthandler | ast.match_case):
                    yield from walk(child.body, inner)

    yield from walk(ast.parse(path.read_text(encoding="utf-8")).body, False)


def graph(*, with_functions: bool) -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {}
    for name, path in known.items():
        edges[name] = {i.target for i in imports_of(name, path)
                       if i.target in known and i.target != name and (with_functions or not i.in_function)}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(edges[target]))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_checker_finds_a_cycle_and_an_import_in_a_function(tmp_path):
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    source = tmp_path / "m.py"
    source.write_text("from typing import TYPE_CHECKING\nimport x\nif TYPE_CHECKING:\n    import y\n"
                      "try:\n    import z\nexcept ImportError:\n    import w\n"
                      "def f():\n    from . import v\n")
    found = {(i.target, i.in_function) for i in imports_of("p.m", source)}
    assert {("x", False), ("z", False), ("w", False), ("p.v", True)} <= found
    assert not any(target == "y" for target, _ in found)


def test_no_module_imports_itself_back_when_it_is_imported():
    assert cycles(graph(with_functions=False)) == []


def test_no_import_cycle_even_through_imports_made_inside_functions():
    assert cycles(graph(with_functions=True)) == []


def test_only_the_assembly_names_channels_or_tools():
    offenders = [f"{path.relative_to(ROOT)}:{i.line} imports {i.target}"
                 for name, path in modules().items() if name.startswith("bruce") and name != ASSEMBLY
                 for i in imports_of(name, path, type_checking=True) if i.target.split(".")[0] in ("channels", "tools")]
    assert offenders == []


# what `bruce run` loads: nothing the config does not use -------------------------------------

UNUSED_WITH_TELEGRAM_ONLY = ("discord", "mcp", "uvicorn", "trafilatura", "bruce.eval", "bruce.admin", "jinja2",
                             "prometheus_client", "aiogram", "litellm")

_BUILD = """
import asyncio, json, sys
from bruce.app import build_app
from bruce.config.loader import parse_config

async def main():
    app = await build_app(parse_config(json.loads(sys.argv[1])))
    try:
        assert await app.start_admin() is None
        print("LOADED", json.dumps(sorted(m for m in json.loads(sys.argv[2]) if m in sys.modules)))
    finally:
        await app.stop()

asyncio.run(main())
"""


def test_building_the_daemon_with_telegram_only_loads_no_unused_library(tmp_path):
    """aiogram and litellm load in threads once the app starts; the rest never, with this config."""
    import json
    import os
    import subprocess
    import sys

    config = {"storage": {"path": str(tmp_path / "bruce.db")}, "console": {"socket_path": str(tmp_path / "s")},
              "admin": {"enabled": False},
              "llm": {"model": "openai/m", "api_base": "http://127.0.0.1:9/v1", "api_key": "sk-test"},
              "channels": {"telegram": {"enabled": True, "token": "123456:TEST-token-abcdefghij", "allowed_users": [1]}}}
    done = subprocess.run([sys.executable, "-c", _BUILD, json.dumps(config), json.dumps(UNUSED_WITH_TELEGRAM_ONLY)],
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    loaded = next(line for line in done.stdout.splitlines() if line.startswith("LOADED "))
    assert json.loads(loaded.removeprefix("LOADED ")) == []
