"""Chat commands answered from Bruce's own state. ``/new``: a fresh session in the same
conversation; the session so far is folded into the summary (one model call) and leaves the
model's window; the command never reaches the model. ``/help``: the commands, from the table."""

from __future__ import annotations

import asyncio

from bruce.runtime.summarizer import SUMMARY_INSTRUCTIONS
from bruce.texts import new_session
from bruce.turns.chat_commands import ABOUT
from bruce.turns.commands import COMMANDS, help_text
from tests.fakes.llm_server import Step
from tests.helpers import incoming, rows, say

KEPT = "Started a fresh conversation. I keep a short summary of what came before."


def is_summary(request) -> bool:
    return request["messages"][0]["content"] == SUMMARY_INSTRUCTIONS


def chat_messages(request) -> list[tuple[str, str]]:
    """What a chat request carries besides its system prompt."""
    return [(m["role"], m["content"]) for m in request["messages"][1:]]


async def test_new_folds_the_session_and_the_next_turn_sees_only_its_summary(app, fake_llm, channel):
    fake_llm.add(Step.text("Noted, green tea."), Step.text("Noted, Lisbon."))
    await say(app, "I like green tea")
    await say(app, "I live in Lisbon")
    fake_llm.add(Step.text("The user likes green tea and lives in Lisbon."))
    await say(app, "/new")
    (summary_request,) = fake_llm.requests[2:]  # one model call: the summary
    assert is_summary(summary_request)
    transcript = summary_request["messages"][1]["content"]
    assert "user: I like green tea" in transcript and "assistant: Noted, Lisbon." in transcript
    assert "/new" not in transcript
    assert channel.texts()[-1] == KEPT

    fake_llm.add(Step.text("You like green tea."))
    await say(app, "what do you know about me?")
    request = fake_llm.requests[-1]
    assert chat_messages(request) == [("user", "what do you know about me?")]
    system = request["messages"][0]["content"]
    assert "<conversation_context>\nSummary of the earlier part of this conversation:\n" \
           "The user likes green tea and lives in Lisbon.\n</conversation_context>" in system
    assert not any("/new" in str(m["content"]) for r in fake_llm.requests for m in r["messages"][1:]
                   if not is_summary(r))
    (command,) = await rows(app, "SELECT id, status, kind FROM messages WHERE text = '/new'")
    assert command["status"] == "done"
    (notice,) = await rows(app, "SELECT kind, status FROM messages WHERE text = ?", KEPT)
    assert notice == {"kind": "notice", "status": "sent"}
    (conversation,) = await rows(app, "SELECT session_start_id FROM conversations WHERE id = 'test:c1'")
    assert conversation["session_start_id"] == command["id"]
    assert [t["status"] for t in await rows(app, "SELECT status FROM turns WHERE source = 'summary'")] == ["ok"]


async def test_with_the_model_down_the_earlier_messages_still_leave_the_window(app_factory, fake_llm, channel):
    app = await app_factory(llm={"num_retries": 0})
    fake_llm.add(Step.text("Noted."))
    await say(app, "my secret word is plum")
    fake_llm.add(Step.error(500))
    await say(app, "/new")
    assert channel.texts()[-1] == new_session(summary_kept=False, summary_failed=True)
    assert "could not make a summary" in channel.texts()[-1]
    (command,) = await rows(app, "SELECT status FROM messages WHERE text = '/new'")
    assert command["status"] == "done"
    assert await rows(app, "SELECT id FROM session_summaries") == []

    fake_llm.add(Step.text("Hello."))
    await say(app, "hello")
    request = fake_llm.requests[-1]
    assert chat_messages(request) == [("user", "hello")]
    assert "plum" not in request["messages"][0]["content"]
    assert "No earlier conversation has been summarized yet." in request["messages"][0]["content"]


async def test_new_in_an_empty_conversation_costs_no_model_call(app, fake_llm, channel):
    await say(app, "/new@bruce_test_bot")
    assert fake_llm.requests == []
    assert channel.texts() == ["Started a fresh conversation."]


async def test_a_message_sent_right_after_new_is_answered_in_the_new_session(app, fake_llm, channel):
    fake_llm.add(Step.text("Noted."))
    await say(app, "remember: the cat is Tom")
    fake_llm.add(Step.delay(0.2, Step.text("The cat is Tom.")), Step.text("Hi there."))
    first = await app.worker.deliver(incoming(app, "/new"))
    second = await app.worker.deliver(incoming(app, "hi"))
    assert first is not None and second is not None
    await asyncio.gather(first, second)
    summary, answer = fake_llm.requests[1:]
    assert is_summary(summary) and "the cat is Tom" in summary["messages"][1]["content"]
    assert "user: hi" not in summary["messages"][1]["content"]
    assert chat_messages(answer) == [("user", "hi")]
    assert channel.texts()[1:] == [KEPT, "Hi there."]


async def test_background_folding_never_brings_the_earlier_session_back(app_factory, fake_llm):
    app = await app_factory(assistant={"history_limit": 2, "summary_batch": 2}, llm={"num_retries": 0})
    model_down = False

    def respond(body):
        if body["messages"][0]["content"] == SUMMARY_INSTRUCTIONS:
            return Step.error(500) if model_down else Step.text("A summary.")
        return Step.text("answer to " + body["messages"][-1]["content"])

    fake_llm.responder = respond
    for text in ("old one", "old two", "old three"):
        await say(app, text)
        await app.worker.wait_idle()
    model_down = True
    await say(app, "/new")
    model_down = False
    folds_before = sum(is_summary(r) for r in fake_llm.requests)
    for text in ("new one", "new two", "new three", "new four"):
        await say(app, text)
        await app.worker.wait_idle()
    later = [r for r in fake_llm.requests if is_summary(r)][folds_before:]
    assert later, "the new session was folded too"
    for request in later:
        new_messages = request["messages"][1]["content"].split("New messages:\n", 1)[1]
        assert "old" not in new_messages
    last = [r for r in fake_llm.requests if not is_summary(r)][-1]
    assert all("old" not in content for _, content in chat_messages(last))


async def test_the_summary_covering_the_most_is_the_one_shown(app):
    """A background fold finishing after /new's own summary covers less and does not replace it."""
    messages = app.store.messages
    await messages.ensure_conversation("test:c1", "test", "c1")
    await messages.add_summary("test:c1", "up to twenty", up_to_message_id=20)
    await messages.add_summary("test:c1", "up to ten", up_to_message_id=10)
    latest = await messages.latest_summary("test:c1")
    assert latest is not None and latest.summary == "up to twenty"


async def test_help_lists_the_commands_of_the_table_without_the_model(app, fake_llm, channel):
    await say(app, "/help")
    (reply,) = channel.texts()
    assert reply == help_text("Bruce", about=ABOUT)
    assert all(f"{spec.usage}: " in reply for spec in COMMANDS)
    assert fake_llm.requests == []
    (answered,) = await rows(app, "SELECT status FROM messages WHERE direction = 'in'")
    assert answered["status"] == "done"


async def test_id_is_answered_by_the_core_where_the_platform_passes_it_on(app, fake_llm, channel):
    await say(app, "/id")
    (reply,) = channel.texts()
    assert reply.startswith("There is no user id to allow-list here: the test channel is on this machine")
    assert fake_llm.requests == []
