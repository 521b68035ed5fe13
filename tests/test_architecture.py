"""The shape of the tree, measured statically (docs/architecture.md, "Rules the tree keeps"): a change
that breaks one of them fails here with the places to look at, not in a review. Import cycles and
who may name channels and tools: tests/test_imports.py; test files named after modules:
tests/test_layout.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("bruce", "channels", "tools")


def _modules() -> list[Path]:
    return sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def _functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def _length(node: ast.AST) -> int:
    return (node.end_lineno or node.lineno) - node.lineno + 1


def test_the_core_keeps_a_small_top_level() -> None:
    top = sorted(p.name for p in (ROOT / "bruce").glob("*.py"))
    assert len(top) <= 12, top


def test_no_module_grows_past_450_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > 450}
    assert long == {}


def test_no_class_has_more_than_25_methods() -> None:
    big = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = [n for n in node.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
                if len(methods) > 25:
                    big[f"{path.relative_to(ROOT)}:{node.name}"] = len(methods)
    assert big == {}


def test_functions_stay_short() -> None:
    lengths = {f"{p.relative_to(ROOT)}:{f.name}": _length(f) for p in _modules()
               for f in _functions(ast.parse(p.read_text()))}
    over_60 = {name: n for name, n in lengths.items() if n > 60}
    over_40 = {name: n for name, n in lengths.items() if n > 40}
    assert over_60 == {}
    assert len(over_40) <= 10, over_40


_SQL = re.compile(r"\b(SELECT\s.+\sFROM|INSERT\s+INTO|UPDATE\s+\w+\s+SET|DELETE\s+FROM)\b", re.IGNORECASE | re.DOTALL)


def _strings(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]


def test_sql_is_written_only_in_the_store() -> None:
    outside = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "bruce").rglob("*.py")
                     if "store" not in p.relative_to(ROOT / "bruce").parts
                     and any(_SQL.search(s) for s in _strings(ast.parse(p.read_text()))))
    assert outside == []


def test_channels_name_no_core_tool() -> None:
    names = re.compile(r"\b(web|artifact|memory|proactive|math|clock|files|http)[._](search|read_url|save|remember|"
                       r"forget|create|cancel|calculate|now|write|post)\b")
    found = sorted(f"{p.relative_to(ROOT)}: {s!r}" for p in (ROOT / "channels").rglob("*.py")
                   for s in _strings(ast.parse(p.read_text())) if names.search(s))
    assert found == []


def test_the_assembly_wires_by_constructor_only() -> None:
    """bruce/app.py passes every collaborator to a constructor; it never sets an attribute of
    something it built (``worker.on_x = f`` hides a dependency from whoever reads Worker)."""
    tree = ast.parse((ROOT / "bruce" / "app.py").read_text())
    patched = [f"line {node.lineno}: {ast.unparse(target)}" for node in ast.walk(tree)
               if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign)
               for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
               if isinstance(target, ast.Attribute) and not (isinstance(target.value, ast.Name)
                                                            and target.value.id == "self")]
    assert patched == []
