"""``bruce memory`` on the machine, in-process over a real database: list, export and forget as
the owner sees them, and no empty database made by mistake. (The same commands as a subprocess
against a running app: tests/memory/test_long_term.py.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
import yaml

from bruce.cli.main import main
from bruce.store import Store
from bruce.values import FactType
from tests.fakes.clock import FakeClock


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "config.yml"
    path.write_text(yaml.safe_dump({"assistant": {"timezone": "America/Sao_Paulo"},
                                    "storage": {"path": str(tmp_path / "bruce.db")}}))
    return path


async def _remember(db: Path, clock: FakeClock, facts: list[tuple[FactType, str]]) -> list[int]:
    store = await Store.open(db, clock)
    try:
        await store.migrate()
        ids = []
        for kind, text in facts:
            fact, _ = await store.memory.remember(kind, text, confidence=1, origin="owner", conversation_id=None,
                                                  source_turn_id=None)
            ids.append(fact.id)
        return ids
    finally:
        await store.close()


def test_list_shows_whose_each_fact_is(capsys: pytest.CaptureFixture[str], config: Path, tmp_path: Path,
                                       clock: FakeClock) -> None:
    async def plant() -> None:
        store = await Store.open(tmp_path / "bruce.db", clock)
        try:
            for person in ("owner", "telegram:222"):
                await store.memory.remember(FactType.FACT, f"Fact of {person}", confidence=1, origin="tool",
                                            conversation_id=None, source_turn_id=None, person=person)
        finally:
            await store.close()

    asyncio.run(plant())
    code, out, _ = bruce(capsys, config, "list")
    assert [line.split()[1] for line in out.splitlines()] == ["owner", "telegram:222"]
    assert [f["person"] for f in json.loads(bruce(capsys, config, "list", "--json")[1])] == ["owner", "telegram:222"]


@pytest.fixture
def facts(tmp_path: Path, config: Path, clock: FakeClock) -> list[int]:
    return asyncio.run(_remember(tmp_path / "bruce.db", clock, [
        (FactType.FACT, "Daughter is Ana"), (FactType.PREFERENCE, "Likes green\ntea")]))


def bruce(capsys: pytest.CaptureFixture[str], config: Path, *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["--config", str(config), "memory", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_shows_each_fact_on_one_line(capsys: pytest.CaptureFixture[str], config: Path, facts: list[int]) -> None:
    code, out, _ = bruce(capsys, config, "list")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2
    assert lines[0].endswith("2026-12-02 09:00 -03 (America/Sao_Paulo)  [fact] Daughter is Ana")  # the owner's zone
    assert lines[0].split()[0] == str(facts[0])
    assert lines[1].endswith("[preference] Likes green tea")
    code, out, _ = bruce(capsys, config, "list", "--json")
    assert [(f["id"], f["type"], f["content"]) for f in json.loads(out)] == [
        (facts[0], "fact", "Daughter is Ana"), (facts[1], "preference", "Likes green\ntea")]


def test_export_writes_every_fact_and_summary_whole(capsys: pytest.CaptureFixture[str], config: Path,
                                                   facts: list[int], tmp_path: Path) -> None:
    target = tmp_path / "memory.json"
    code, _, err = bruce(capsys, config, "export", str(target))
    assert code == 0 and f"wrote 2 facts and 0 summaries to {target}" in err
    exported = json.loads(target.read_text())
    assert [f["content"] for f in exported["facts"]] == ["Daughter is Ana", "Likes green\ntea"]
    assert exported["summaries"] == [] and not (tmp_path / "memory.json.tmp").exists()
    code, out, _ = bruce(capsys, config, "export")
    assert code == 0 and json.loads(out) == exported


def test_an_export_that_cannot_be_written_says_so_and_leaves_nothing(
        capsys: pytest.CaptureFixture[str], config: Path, facts: list[int], tmp_path: Path) -> None:
    code, _, err = bruce(capsys, config, "export", str(tmp_path / "no" / "such" / "memory.json"))
    assert code == 1 and "cannot write" in err and "nothing was exported" in err
    assert not (tmp_path / "no").exists()


def test_forget_one_then_everything(capsys: pytest.CaptureFixture[str], config: Path, facts: list[int]) -> None:
    code, out, _ = bruce(capsys, config, "forget", str(facts[0]))
    assert code == 0 and out.strip() == f"forgot {facts[0]}: Daughter is Ana"
    code, out, _ = bruce(capsys, config, "list")
    assert "Daughter" not in out and "Likes green tea" in out
    code, _, err = bruce(capsys, config, "forget", str(facts[0]))
    assert code == 1 and f"there is no fact {facts[0]}" in err
    code, out, _ = bruce(capsys, config, "forget", "--all")
    assert code == 0 and out.strip() == "forgot everything (1 facts)"
    assert bruce(capsys, config, "list")[1].strip() == "Bruce remembers nothing yet."


@pytest.mark.parametrize("argv", [["forget"], ["forget", "3", "--all"]])
def test_forget_takes_an_id_or_all_not_both(capsys: pytest.CaptureFixture[str], config: Path,
                                            argv: list[str]) -> None:
    code, _, err = bruce(capsys, config, *argv)
    assert code == 2 and "takes a fact id or --all (not both)" in err


def test_without_a_database_it_says_how_to_make_one_and_makes_none(
        capsys: pytest.CaptureFixture[str], config: Path, tmp_path: Path) -> None:
    code, _, err = bruce(capsys, config, "list")
    assert code == 1 and "start Bruce once with `bruce run`" in err and str(config) in err
    assert not (tmp_path / "bruce.db").exists()
