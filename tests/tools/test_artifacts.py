"""artifact.save: sanitised file names, one file plus one row, size limit, dry run."""

from __future__ import annotations

import asyncio
import hashlib
import threading
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from jsonschema import Draft202012Validator

from bruce.actions.checks import check_contract
from bruce.contracts import DryRun, Risk, ToolContext
from bruce.errors import ToolFailed
from bruce.store import Store
from bruce.values import ConversationId
from tests.fakes.clock import FakeClock
from tests.helpers import db_rows
from tools import artifacts
from tools.artifacts import artifact_save_tool, safe_filename

BASE = "http://bruce.local:8080/"


@pytest.fixture
async def store(tmp_path: Path, clock: FakeClock):
    store = await Store.open(tmp_path / "b.db", clock)
    await store.messages.ensure_conversation("test:1", "test", "1")
    yield store
    await store.close()


@pytest.fixture
def artifacts_dir(tmp_path: Path) -> Path:
    return tmp_path / "data" / "artifacts"


@pytest.fixture
def tool(store: Store, artifacts_dir: Path):
    return artifact_save_tool(store=store, artifacts_dir=artifacts_dir, base_url=BASE, max_bytes=1000)


HERE = ConversationId("test", "1")


def ctx(*, dry_run: bool = False, conversation_id: ConversationId | None = HERE) -> ToolContext:
    return ToolContext(clock=FakeClock(), zone=ZoneInfo("UTC"), conversation_id=conversation_id,
                       turn_id=None, dry_run=dry_run)


def test_contract_declares_its_policy(tool):
    contract, handler = tool
    assert check_contract(contract) == []
    assert contract.name == "artifact.save" and contract.risk is Risk.MEDIUM
    assert contract.autonomous and not contract.confirmation and contract.dry_run is DryRun.OPTIONAL
    assert contract.idempotent and contract.idempotency_window_s == 3600
    validator = Draft202012Validator(contract.input_schema)
    assert not validator.is_valid({"filename": "a", "content": "x", "format": "pdf"})
    assert not validator.is_valid({"filename": "a", "content": "x", "extra": 1})
    assert validator.is_valid({"filename": "a", "content": "x", "format": "text", "title": "T"})


@pytest.mark.parametrize(
    ("raw", "fmt", "expected"),
    [
        ("report.html", "html", "report.html"),
        ("../../etc/passwd", "html", "passwd.html"),
        ("..\\..\\windows\\system.ini", "text", "system.txt"),
        ("report.exe", "html", "report.html"),
        ("report.HTM", "markdown", "report.md"),
        ("..hidden", "text", "hidden.txt"),
        ("--.-x", "text", "x.txt"),
        ("relatório de São Paulo.md", "markdown", "relatorio-de-Sao-Paulo.md"),
        ("日本語", "html", "artifact.html"),
        ("...", "html", "artifact.html"),
        ("a<b>|c?*.txt", "text", "a-b-c.txt"),
        ("x" * 120, "html", "x" * 95 + ".html"),
    ],
)
def test_safe_filename(raw: str, fmt: str, expected: str):
    assert safe_filename(raw, fmt) == expected


async def test_saves_one_file_and_records_it(store: Store, tool, artifacts_dir: Path):
    _, handler = tool
    content = "<h1>Olá</h1>"
    out = await handler({"filename": "../../etc/passwd", "content": content, "title": "Trip"}, ctx())
    artifact_id = out["artifact_id"]
    assert len(artifact_id) == 16 and int(artifact_id, 16) >= 0
    assert out == {
        "artifact_id": artifact_id, "url": f"http://bruce.local:8080/artifacts/{artifact_id}/passwd.html",
        "filename": "passwd.html", "format": "html", "size_bytes": len(content.encode()),
    }
    path = artifacts_dir / artifact_id / "passwd.html"
    assert path.read_text(encoding="utf-8") == content
    assert [p.name for p in (artifacts_dir / artifact_id).iterdir()] == ["passwd.html"]  # no temp file left
    row = await store.artifacts.get(artifact_id)
    assert row is not None
    assert row.conversation_id == "test:1" and row.title == "Trip" and row.format == "html"
    assert row.path == f"{artifact_id}/passwd.html" and row.size_bytes == len(content.encode())
    assert row.sha256 == hashlib.sha256(content.encode()).hexdigest()


async def test_each_call_gets_its_own_id_and_folder(tool, artifacts_dir: Path):
    _, handler = tool
    a = await handler({"filename": "notes", "content": "# a", "format": "markdown"}, ctx(conversation_id=None))
    b = await handler({"filename": "notes", "content": "# b", "format": "markdown"}, ctx(conversation_id=None))
    assert a["artifact_id"] != b["artifact_id"] and a["filename"] == b["filename"] == "notes.md"
    assert (artifacts_dir / a["artifact_id"] / "notes.md").read_text() == "# a"
    assert (artifacts_dir / b["artifact_id"] / "notes.md").read_text() == "# b"


async def test_too_large_counts_utf8_bytes(tool, artifacts_dir: Path):
    _, handler = tool
    await handler({"filename": "ok.txt", "content": "a" * 1000, "format": "text"}, ctx())  # exactly the limit
    with pytest.raises(ToolFailed) as info:
        await handler({"filename": "big.txt", "content": "é" * 501, "format": "text"}, ctx())  # 1002 bytes
    assert info.value.code == "too_large" and "1002 bytes" in str(info.value) and "1000" in str(info.value)
    assert len(list(artifacts_dir.iterdir())) == 1


async def test_dry_run_validates_and_writes_nothing(store: Store, tool, artifacts_dir: Path, tmp_path: Path):
    _, handler = tool
    out = await handler({"filename": "Plan final!.exe", "content": "hello", "format": "text"}, ctx(dry_run=True))
    assert out == {"would_save": "Plan-final.txt", "format": "text", "size_bytes": 5,
                   "url_pattern": "http://bruce.local:8080/artifacts/<id>/Plan-final.txt"}
    assert not artifacts_dir.exists()
    assert db_rows(tmp_path / "b.db", "SELECT * FROM artifacts") == []
    with pytest.raises(ToolFailed) as info:
        await handler({"filename": "x", "content": "x" * 1001}, ctx(dry_run=True))
    assert info.value.code == "too_large"


async def test_content_that_is_not_text_is_refused(tool, artifacts_dir: Path):
    _, handler = tool
    with pytest.raises(ToolFailed) as info:
        await handler({"filename": "a.txt", "content": "bad \ud800 surrogate", "format": "text"}, ctx())
    assert info.value.code == "invalid_args" and "not valid text" in str(info.value)
    assert not artifacts_dir.exists()


async def test_content_far_over_the_limit_is_refused_without_encoding_it(tool, artifacts_dir: Path):
    _, handler = tool
    with pytest.raises(ToolFailed) as info:
        await handler({"filename": "big.txt", "content": "x" * 5_000_000, "format": "text"}, ctx())
    assert info.value.code == "too_large" and "at least 5000000 bytes" in str(info.value)
    assert not artifacts_dir.exists()


async def test_a_time_out_while_hashing_leaves_nothing_behind(tool, artifacts_dir: Path, tmp_path: Path, monkeypatch):
    hashing, release = threading.Event(), threading.Event()
    real = artifacts._sha256

    def slow_sha256(data: bytes) -> str:
        hashing.set()
        release.wait(5)
        return real(data)

    monkeypatch.setattr(artifacts, "_sha256", slow_sha256)
    _, handler = tool
    save = asyncio.create_task(handler({"filename": "a.txt", "content": "hello", "format": "text"}, ctx()))
    while not hashing.is_set():
        await asyncio.sleep(0.01)
    assert not save.done()  # hashing runs off the loop
    save.cancel()  # what the registry's time-out does
    with pytest.raises(asyncio.CancelledError):
        await save
    release.set()
    assert not artifacts_dir.exists()  # nothing was written: the hash comes before the file
    assert db_rows(tmp_path / "b.db", "SELECT * FROM artifacts") == []


def keyed(key: str, clock: FakeClock | None = None) -> ToolContext:
    clock = clock or FakeClock()
    return ToolContext(clock=clock, zone=ZoneInfo("UTC"), conversation_id=HERE, turn_id=None, idempotency_key=key,
                       now=clock.now())


def files_under(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


async def test_the_same_keyed_call_run_again_returns_its_own_artifact(store: Store, tool, artifacts_dir: Path, tmp_path):
    # a crash came after the save but before the registry recorded it: the call is run again with its key
    _, handler = tool
    args = {"filename": "plan.html", "content": "<h1>Plan</h1>"}
    first = await handler(args, keyed("k1"))
    again = await handler(args, keyed("k1"))
    assert again == first
    assert files_under(artifacts_dir) == [f"{first['artifact_id']}/plan.html"]
    assert len(db_rows(tmp_path / "b.db", "SELECT id FROM artifacts")) == 1


async def test_a_keyed_save_cut_off_between_its_file_and_its_row_is_finished_not_doubled(
        store: Store, tool, artifacts_dir: Path, tmp_path):
    _, handler = tool
    args = {"filename": "plan.html", "content": "<h1>Plan</h1>"}
    artifact_id = artifacts.artifact_id_for("k1")
    (artifacts_dir / artifact_id).mkdir(parents=True)
    (artifacts_dir / artifact_id / "plan.html").write_text("<h1>Pl")  # killed mid-way, before the row
    out = await handler(args, keyed("k1"))
    assert out["artifact_id"] == artifact_id
    assert (artifacts_dir / artifact_id / "plan.html").read_text() == "<h1>Plan</h1>"
    assert files_under(artifacts_dir) == [f"{artifact_id}/plan.html"]
    assert db_rows(tmp_path / "b.db", "SELECT id FROM artifacts") == [{"id": artifact_id}]


async def test_a_keyed_artifact_whose_file_was_lost_gets_it_back(store: Store, tool, artifacts_dir: Path):
    _, handler = tool
    args = {"filename": "plan.html", "content": "<h1>Plan</h1>"}
    first = await handler(args, keyed("k1"))
    (artifacts_dir / first["artifact_id"] / "plan.html").unlink()
    assert await handler(args, keyed("k1")) == first
    assert (artifacts_dir / first["artifact_id"] / "plan.html").read_text() == "<h1>Plan</h1>"


async def test_after_the_window_the_same_keyed_call_saves_a_new_artifact(store: Store, tool, artifacts_dir: Path,
                                                                           clock: FakeClock):
    _, handler = tool
    args = {"filename": "plan.html", "content": "<h1>Plan</h1>"}
    first = await handler(args, keyed("k1", clock))
    clock.advance(minutes=61)
    second = await handler(args, keyed("k1", clock))
    assert second["artifact_id"] != first["artifact_id"]
    assert await handler(args, keyed("k1", clock)) == second  # and that one is replayed in its own window
    assert len(files_under(artifacts_dir)) == 2


async def test_different_keys_save_different_artifacts(store: Store, tool, artifacts_dir: Path):
    _, handler = tool
    args = {"filename": "plan.html", "content": "<h1>Plan</h1>"}
    assert (await handler(args, keyed("k1")))["artifact_id"] != (await handler(args, keyed("k2")))["artifact_id"]
