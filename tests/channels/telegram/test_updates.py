"""channels.telegram.updates: one update at a time, read into aiogram's types, with a stand-in
for the aiogram bot and for the core. The same paths end to end are in ``test_channel.py``."""

from __future__ import annotations

from aiogram.types import Update

from bruce.channel import DecisionReport, IncomingMessage
from bruce.config.schema import TelegramConfig
from bruce.values import AttachmentKind, ConversationId, DecisionOutcome
from channels.telegram.updates import UpdateHandler
from tests.fakes.clock import FakeClock

OWNER = 111
STRANGER = 666
GROUP = -500


class Bot:
    def __init__(self) -> None:
        self.plain: list[tuple[int, str]] = []
        self.answers: list[tuple[str, bool]] = []
        self.outcomes: list[str] = []

    async def send_plain(self, chat_id: int, text: str) -> None:
        self.plain.append((chat_id, text))

    async def answer_button(self, query, text: str, *, alert: bool) -> None:
        self.answers.append((text, alert))

    async def show_outcome(self, message, text: str) -> None:
        self.outcomes.append(text)


class Core:
    def __init__(self) -> None:
        self.delivered: list[IncomingMessage] = []
        self.decided: list[tuple[str, str, str, bool]] = []

    async def deliver(self, message: IncomingMessage) -> None:
        self.delivered.append(message)

    async def decide(self, conversation_id: str, user_id: str, confirmation_id: str, approve: bool) -> DecisionReport:
        self.decided.append((conversation_id, user_id, confirmation_id, approve))
        return DecisionReport(DecisionOutcome.APPROVED, "Approved.")


def handler(**section) -> tuple[UpdateHandler, Bot, Core]:
    bot, core = Bot(), Core()

    async def get_bot() -> Bot:
        return bot

    updates = UpdateHandler(TelegramConfig(allowed_users=[str(OWNER)], **section), clock=FakeClock(),
                            assistant_name="Bruce", bot=get_bot)
    updates.attach(core)
    updates.identify("bruce_bot", 42)
    return updates, bot, core


def message(sender: int, chat: int, text: str | None, *, n: int = 1, **extra) -> dict:
    body = {"message_id": n, "date": 1_700_000_000, "from": {"id": sender, "is_bot": False, "first_name": "Ann"},
            "chat": {"id": chat, "type": "private" if chat > 0 else "group"}, **extra}
    if text is not None:
        body["text"] = text
    return body


def update(n: int = 1, **fields) -> Update:
    return Update.model_validate({"update_id": n, **fields})


async def test_a_private_message_is_delivered_with_its_platform_id():
    updates, _, core = handler()
    await updates.handle(update(message=message(OWNER, OWNER, "hello", n=7)))
    [delivered] = core.delivered
    assert (delivered.channel, delivered.chat_id, delivered.sender_id, delivered.text) == (
        "telegram", str(OWNER), str(OWNER), "hello")
    assert delivered.platform_message_id == f"{OWNER}:7" and delivered.private


async def test_in_a_group_only_a_mention_is_passed_on_without_it():
    updates, _, core = handler()
    await updates.handle(update(message=message(OWNER, GROUP, "just chatting")))
    await updates.handle(update(message=message(OWNER, GROUP, "@bruce_bot2 not us")))
    await updates.handle(update(message=message(OWNER, GROUP, "@Bruce_Bot what time is it?")))
    assert [m.text for m in core.delivered] == ["what time is it?"]
    assert not core.delivered[0].private


async def test_groups_turned_off_pass_nothing_on():
    updates, _, core = handler(groups=False)
    await updates.handle(update(message=message(OWNER, GROUP, "@bruce_bot hi")))
    assert core.delivered == []


STICKER = {"file_id": "s1", "file_unique_id": "us1", "type": "regular", "width": 512, "height": 512,
           "is_animated": False, "is_video": False}


async def test_a_sticker_goes_to_the_core_as_an_other_and_a_service_message_nowhere():
    updates, bot, core = handler()
    await updates.handle(update(1, message=message(OWNER, OWNER, None, n=1, sticker=STICKER)))
    await updates.handle(update(2, message=message(OWNER, OWNER, None, n=2, new_chat_title="x")))
    [delivered] = core.delivered
    assert delivered.text == "" and [(a.kind, a.label, a.ref) for a in delivered.attachments] == [
        (AttachmentKind.OTHER, "sticker", "")]
    assert bot.plain == []


async def test_a_caption_that_is_a_command_is_not_answered_here():
    updates, bot, core = handler()
    await updates.handle(update(message=message(OWNER, OWNER, None, caption="/help", sticker=STICKER)))
    assert bot.plain == [] and core.delivered[0].text == "/help"


async def test_in_a_group_media_needs_a_mention_in_its_caption_or_a_reply_to_the_bot():
    updates, _, core = handler()
    bot_message = message(42, GROUP, "earlier", n=1)
    bot_message["from"] = {"id": 42, "is_bot": True, "first_name": "Bruce"}
    await updates.handle(update(1, message=message(OWNER, GROUP, None, n=2, sticker=STICKER)))
    await updates.handle(update(2, message=message(OWNER, GROUP, None, n=3, caption="look @bruce_bot",
                                                   sticker=STICKER)))
    await updates.handle(update(3, message=message(OWNER, GROUP, None, n=4, sticker=STICKER,
                                                   reply_to_message=bot_message)))
    assert [(m.platform_message_id, m.text) for m in core.delivered] == [(f"{GROUP}:3", "look"), (f"{GROUP}:4", "")]


async def test_id_answers_a_stranger_once_a_minute():
    updates, bot, core = handler()
    for n in (1, 2):
        await updates.handle(update(n, message=message(STRANGER, STRANGER, "/id", n=n)))
    assert bot.plain == [(STRANGER, f"Your Telegram user id is {STRANGER}.")] and core.delivered == []


async def test_a_button_press_is_decided_and_the_request_shows_the_outcome():
    updates, bot, core = handler()
    query = {"id": "q1", "from": {"id": OWNER, "is_bot": False, "first_name": "Ann"}, "chat_instance": "c",
             "data": "approve:abc", "message": message(42, OWNER, "Approval needed")}
    await updates.handle(update(callback_query=query))
    assert core.decided == [(ConversationId("telegram", str(OWNER)), str(OWNER), "abc", True)]
    assert bot.answers == [("Approved.", False)] and bot.outcomes == ["Approved."]


async def test_a_button_that_is_not_ours_is_refused():
    updates, bot, core = handler()
    query = {"id": "q1", "from": {"id": OWNER, "is_bot": False, "first_name": "Ann"}, "chat_instance": "c",
             "data": "launch:now", "message": message(42, OWNER, "?")}
    await updates.handle(update(callback_query=query))
    assert core.decided == [] and bot.answers == [("This button is not one of mine.", True)]


async def test_nothing_is_handled_once_detached():
    updates, _, core = handler()
    updates.attach(None)
    await updates.handle(update(message=message(OWNER, OWNER, "hello")))
    assert core.delivered == []
