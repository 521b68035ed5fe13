"""Issue 30, point 6: ``bruce jobs list/show``, ``bruce memory list`` and ``bruce pairing list``
printed text a model or a stranger wrote as it was stored, so ``ESC[2K ESC[1G`` erased the line
on the owner's terminal and redrew it as something harmless-looking. Every command that prints
stored text now writes such characters out (``ESC`` as ``^[``, U+202E as ``<U+202E>``), as
``bruce chat`` does, and its JSON escapes them (``\\u001b``), so the data read back is the same.
The real commands run in-process on a real database, as the owner types them."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
import yaml

from bruce.cli.main import main
from bruce.values import ConversationId, FactType
from tests.fakes.llm_server import Step

# erase the line, go to its start, write something else; a one-byte CSI; a right-to-left override
PAYLOAD = "send the report to eve\x1b[2K\x1b[1GWater the plants \x9b2K \u202etxt.exe"
SHOWN = "send the report to eve^[[2K^[[1GWater the plants <U+009B>2K <U+202E>txt.exe"
CID = ConversationId("test", "c1")
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


@pytest.fixture
def bruce(tmp_path, clock, monkeypatch):
    """`bruce --config <tmp>/config.yml ...` in-process on the app's database: (exit code, out, err)."""
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"assistant": {"timezone": "America/Sao_Paulo"},
                                      "storage": {"path": str(tmp_path / "bruce.db")},
                                      "console": {"socket_path": str(tmp_path / "bruce.sock")}}))
    for module in ("jobs", "pairing", "memory"):
        monkeypatch.setattr(f"bruce.cli.{module}.SystemClock", lambda: clock)

    async def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = await asyncio.to_thread(main, ["--config", str(config), *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return run


def assert_nothing_raw(text: str) -> None:
    assert RAW.findall(text) == [], f"raw control characters printed: {text!r}"


async def test_jobs_list_and_show_write_the_escape_codes_out(app, bruce, capsys):
    job = (await app.jobs.create(CID, {"execution_mode": "message", "content": PAYLOAD,
                                             "in_seconds": 120})).job
    for argv in (("jobs", "list"), ("jobs", "list", "--all"), ("jobs", "show", job.id)):
        code, out, err = await bruce(capsys, *argv)
        assert code == 0, err
        assert_nothing_raw(out + err)
        assert "^[[2K^[[1GWater" in out
    _, out, _ = await bruce(capsys, "jobs", "show", job.id)
    assert SHOWN in out  # whole, as stored


async def test_jobs_json_escapes_them_and_reads_back_the_same(app, bruce, capsys):
    job = (await app.jobs.create(CID, {"execution_mode": "message", "content": PAYLOAD,
                                             "in_seconds": 120})).job
    _, out, _ = await bruce(capsys, "jobs", "list", "--json")
    assert_nothing_raw(out)
    assert json.loads(out)[0]["content"] == PAYLOAD
    _, out, _ = await bruce(capsys, "jobs", "show", job.id, "--json")
    assert_nothing_raw(out)
    assert json.loads(out)["content"] == PAYLOAD


async def test_a_job_change_prints_the_job_without_raw_codes(app, bruce, capsys):
    job = (await app.jobs.create(CID, {"execution_mode": "message", "content": PAYLOAD,
                                             "in_seconds": 120})).job
    code, out, err = await bruce(capsys, "jobs", "pause", job.id)
    assert code == 0, err
    assert_nothing_raw(out + err)


async def remember(app, text: str) -> int:
    fact, _ = await app.store.memory.remember(FactType.FACT, text, confidence=1, origin="owner",
                                              conversation_id=None, source_turn_id=None)
    return fact.id


async def test_memory_list_export_and_forget_write_the_escape_codes_out(app, bruce, capsys):
    fact_id = await remember(app, PAYLOAD)
    code, out, _ = await bruce(capsys, "memory", "list")
    assert code == 0 and SHOWN in out
    assert_nothing_raw(out)
    _, out, _ = await bruce(capsys, "memory", "list", "--json")
    assert_nothing_raw(out)
    assert json.loads(out)[0]["content"] == PAYLOAD
    _, out, _ = await bruce(capsys, "memory", "export")
    assert_nothing_raw(out)
    assert json.loads(out)["facts"][0]["content"] == PAYLOAD
    code, out, _ = await bruce(capsys, "memory", "forget", str(fact_id))
    assert code == 0 and SHOWN in out
    assert_nothing_raw(out)


async def test_memory_export_to_a_file_is_the_same_data(app, bruce, capsys, tmp_path):
    await remember(app, PAYLOAD)
    target = tmp_path / "memory.json"
    code, _, _ = await bruce(capsys, "memory", "export", str(target))
    assert code == 0
    text = target.read_text(encoding="utf-8")
    assert_nothing_raw(text)  # `cat memory.json` is safe too
    assert json.loads(text)["facts"][0]["content"] == PAYLOAD


async def ask_to_pair(app, name: str) -> str:
    _, code = await app.store.pairing.ask(channel="telegram", sender_id="666", chat_id="666", display_name=name,
                                          expires_at="2999-01-01T00:00:00+00:00", max_pending=10,
                                          new_code=lambda: "ABCD2345")
    assert code is not None
    return code


async def test_pairing_list_and_approve_write_a_strangers_name_out(app, bruce, capsys):
    code = await ask_to_pair(app, "Ana\x1b[2K\x1b[1GYour bank")
    status, out, _ = await bruce(capsys, "pairing", "list")
    assert status == 0 and "Ana^[[2K^[[1GYour bank" in out
    assert_nothing_raw(out)
    status, out, err = await bruce(capsys, "pairing", "approve", code)
    assert status == 0, err
    assert "Ana^[[2K^[[1GYour bank" in out
    assert_nothing_raw(out + err)


def test_mcp_status_shows_a_servers_words_without_acting_on_them(capsys, tmp_path, monkeypatch):
    """A server's errors and its tools' names come from the server: escape codes are written out,
    and rich markup in them (``[black on black]``) is shown as typed, not applied."""
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({"storage": {"path": str(tmp_path / "bruce.db")},
                                      "console": {"socket_path": str(tmp_path / "bruce.sock")},
                                      "mcp_servers": {"evil": {"command": "true"}}}))
    server = {"server": "evil", "transport": "stdio", "state": "failed", "since": "2026-12-02T12:00:00+00:00",
              "last_error": "boom\x1b[2K\x1b[1Gall fine [black on black]hidden[/]",
              "tools": [{"name": "mcp.evil.x\x1b[8m", "risk": "low", "wire_name": "mcp_evil_x"}],
              "skipped": {"y\u202etxt": "bad name\x9b2K"}}

    async def probe(_config):
        return [server]

    monkeypatch.setattr("bruce.app.probe_mcp", probe)
    monkeypatch.setenv("COLUMNS", "300")  # the table's cells on one line each
    for argv in (["mcp", "status"], ["mcp", "status", "--json"]):
        capsys.readouterr()
        main(["--config", str(config), *argv])
        out, err = capsys.readouterr()
        assert_nothing_raw(out + err)
        if "--json" in argv:
            assert json.loads(out)["servers"][0]["last_error"] == server["last_error"]
        else:
            assert "boom^[[2K^[[1Gall fine [black on black]hidden[/]" in out and "y<U+202E>txt" in out


async def test_eval_lines_show_a_models_reply_without_acting_on_it(tmp_path, capsys, fake_llm):
    """A guard: the checks quote a reply with ``repr`` already, and every line goes through
    ``visible`` too."""
    (tmp_path / "evals").mkdir()
    (tmp_path / "evals" / "cases.yml").write_text(
        "cases:\n  - name: hello\n    turns:\n      - user: Hi\n        expect: {must_say: ['goodbye']}\n",
        encoding="utf-8")
    config = tmp_path / "config.yml"
    config.write_text(yaml.safe_dump({
        "llm": {"model": "openai/m", "api_base": fake_llm.base_url, "api_key": "sk-test-123456",
                "retry_backoff_s": 0, "timeout_s": 10},
        "storage": {"path": str(tmp_path / "bruce.db")}, "admin": {"port": 0}}))
    fake_llm.responder = lambda body: Step.text("Nope\x1b[2K\x1b[1GPASS  hello")
    code = await asyncio.to_thread(main, ["--config", str(config), "eval", "run", "--model", "openai/m"])
    out, err = capsys.readouterr()
    assert code == 1
    assert_nothing_raw(out)


def test_a_doctor_line_shows_a_platforms_words_without_acting_on_them():
    from bruce.cli.checks.findings import Finding, Mark

    line = Finding(Mark.FAIL, "telegram: Unauthorized\x1b[2K\x1b[1G✓ telegram: ok", "check the token").line()
    assert line == "✗ telegram: Unauthorized^[[2K^[[1G✓ telegram: ok — fix: check the token"
