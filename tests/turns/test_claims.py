"""Action claims in the final answer, checked in code: tables of phrasings that claim (and
must be caught) and that do not (and must be left alone)."""

from __future__ import annotations

import pytest

from bruce.contracts import ToolResult
from bruce.turns.claims import find_claims, unbacked_claims
from tests.fakes.llm_server import Step
from tests.helpers import rows, say

CLAIMS = [  # (text, the action it claims)
    ("Done! I saved your notes to groceries.md.", "saved"),
    ("I've saved it for you.", "saved"),
    ("I have written the summary to your notes.", "saved"),
    ("I just created a file called plan.md.", "saved"),
    ("I've gone ahead and stored the list.", "saved"),
    ("I wrote everything down in todo.txt", "saved"),
    ("I scheduled the meeting reminder for 9am.", "scheduled"),
    ("I set a reminder for tomorrow at 8.", "scheduled"),
    ("I've set up a reminder to call mom.", "scheduled"),
    ("I'll remind you at 5pm.", "scheduled"),
    ("I sent the summary to your webhook.", "sent"),
    ("I posted them to your webhook.", "sent"),
    ("I've emailed Bob the draft.", "sent"),
    ("I remembered that you like green tea.", "remembered"),
    ("I'll remember that you are vegetarian.", "remembered"),
    ("Salvei suas notas em compras.md.", "saved"),
    ("Eu já escrevi o resumo nas suas notas.", "saved"),
    ("Criei o arquivo plano.md.", "saved"),
    ("Agendei a reunião para amanhã.", "scheduled"),
    ("Criei um lembrete para as 9h.", "scheduled"),
    ("Vou te lembrar amanhã às 8.", "scheduled"),
    ("Enviei o resumo para o seu webhook.", "sent"),
    ("Postei no seu webhook.", "sent"),
    ("Memorizei que você gosta de chá.", "remembered"),
    ("Vou lembrar que você é vegetariano.", "remembered"),
    ("Sure — I saved it, and I sent it to the webhook.", "sent"),
]

NOT_CLAIMS = [
    "I can save this to your notes if you want.",
    "Would you like me to save it?",
    "I could not save the file: the folder is missing.",
    "I have not sent anything yet.",
    "I'm waiting for your approval before I write the file.",
    "You saved the file yesterday, according to the log.",
    "The meeting was scheduled by your boss.",
    "Não salvei nada ainda.",
    "Posso enviar o resumo se você quiser.",
    "Here is the answer: 437.",
    "It is 09:00 in São Paulo.",
]


@pytest.mark.parametrize(("text", "action"), CLAIMS)
def test_claims_are_found(text, action):
    assert action in {c.action for c in find_claims(text)}


@pytest.mark.parametrize("text", NOT_CLAIMS)
def test_non_claims_are_left_alone(text):
    assert find_claims(text) == []


def result(name, status="ok", output=None):
    return ToolResult("c1", name, status, output=output if output is not None else {})


@pytest.mark.parametrize(("text", "results", "unbacked"), [
    ("I saved your notes.", [result("files.write")], []),
    ("I saved your notes.", [result("artifact.save")], []),
    ("I saved your notes.", [], ["saved"]),
    ("I saved your notes.", [result("files.write", "error")], ["saved"]),
    ("I saved your notes.", [result("files.write", output={"dry_run": True, "preview": "x"})], ["saved"]),
    ("I saved your notes.", [result("files.write", "awaiting_confirmation")], []),  # the approval is pending
    ("I saved it and posted it.", [result("files.write")], ["sent"]),
    ("I posted it to your webhook.", [result("http.post")], []),
    ("I posted it to your webhook.", [result("web.search")], ["sent"]),
])
def test_a_claim_is_backed_only_by_a_successful_tool_of_its_domain(text, results, unbacked):
    assert [c.action for c in unbacked_claims(text, results)] == unbacked


async def test_an_unbacked_claim_gets_one_correction_call(app, fake_llm, channel):
    fake_llm.add(Step.text("Done! I saved your notes to groceries.md and posted them to your webhook."),
                 Step.text("I have not saved or sent anything: no tool ran. Want me to write groceries.md?"))
    await say(app, "save my groceries list and post it")
    assert channel.texts() == ["I have not saved or sent anything: no tool ran. Want me to write groceries.md?"]
    correction = fake_llm.requests[1]
    assert "tools" not in correction
    assert "claims that you saved" in correction["messages"][-1]["content"]
    (turn,) = await rows(app, "SELECT status, unbacked_claims, llm_calls FROM turns WHERE source = 'chat'")
    assert turn == {"status": "ok", "unbacked_claims": 2, "llm_calls": 2}


async def test_a_claim_that_survives_the_correction_gets_a_note_from_code(app, fake_llm, channel):
    fake_llm.add(Step.text("I saved your notes."), Step.text("Yes, I saved your notes."))
    await say(app, "save my notes")
    (reply,) = channel.texts()
    assert reply.startswith("Yes, I saved your notes.")
    assert reply.endswith("(Note from Bruce: no tool saved anything in this turn; nothing was saved.)")


async def test_a_backed_claim_costs_no_extra_call(app_factory, fake_llm, channel, tmp_path):
    app = await app_factory(tools={"artifacts": {"dir": str(tmp_path / "a")}})
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "r.html", "content": "x"})),
                 Step.text("I saved the report."))
    await say(app, "save a report")
    assert channel.texts() == ["I saved the report."] and len(fake_llm.requests) == 2
