"""Action claims, checked in code: "I saved / wrote / created / scheduled / set a reminder /
sent / posted / remembered…" (English and Portuguese) in the model's final answer must be backed
by a successful tool of a domain that produces that effect in the same turn, or by a pending
approval for one. An unbacked claim gets one correction call (tools off); if the corrected
answer still claims it, code appends a plain note. False positives cost an extra call; false
negatives would let Bruce claim what it did not do, so the patterns lean wide.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bruce.contracts import ToolResult
from bruce.values import ToolStatus

__all__ = ["Claim", "find_claims", "unbacked_claims", "CORRECTION_NOTE"]

CORRECTION_NOTE = (
    "Your answer above claims that you {claims}, but no tool did that in this turn (tools that ran "
    "successfully: {done}). Rewrite the answer for the user: claim only what the tools did, and say plainly "
    "what was not done. Do not call tools. Write only the new answer."
)

_SAVE = frozenset({"files", "artifact", "notes"})
_SCHEDULE = frozenset({"proactive", "schedule", "scheduler", "reminder", "reminders", "jobs"})
_SEND = frozenset({"http", "email", "message", "messages", "webhook"})
_REMEMBER = frozenset({"memory"})

# "I", "I've", "I have", "I just", "I've gone ahead and", ... before an English verb
_I = r"\bI(?:'ve|’ve|\s+have|'d|\s+had)?(?:\s+(?:just|already|now|also|successfully|gone\s+ahead\s+and|went\s+ahead\s+and))*\s+"
_EN = {
    "saved": (_SAVE, r"(?:saved|wrote|written|stored|recorded|created|noted(?:\s+down)?|jotted|added|put)\b"),
    "scheduled": (_SCHEDULE, r"(?:scheduled|set(?:\s+up)?\s+(?:a|an|the|your)\s+(?:reminder|alarm|timer)"
                             r"|created\s+(?:a|the|your)\s+reminder|booked)\b"),
    "sent": (_SEND, r"(?:sent|posted|emailed|e-mailed|messaged|delivered|published|submitted|forwarded|notified)\b"),
    "remembered": (_REMEMBER, r"(?:remembered|memori[sz]ed|committed\s+(?:it|that|this)\s+to\s+memory"
                              r"|made\s+a\s+note\s+to\s+remember)\b"),
}
_EN_FUTURE = {  # promises of a later effect that only a tool can keep
    "scheduled": (_SCHEDULE, r"\bI(?:'ll|’ll|\s+will)\s+remind\s+you\b"),
    "remembered": (_REMEMBER, r"\bI(?:'ll|’ll|\s+will)\s+remember\b"),
}
_PT = {  # Portuguese first person needs no pronoun: "Salvei suas notas"
    "saved": (_SAVE, r"\b(?:eu\s+)?(?:j[áa]\s+)?(?:salvei|gravei|escrevi|guardei|anotei|registrei|criei|"
                     r"adicionei)\b"),
    "scheduled": (_SCHEDULE, r"\b(?:agendei|programei|marquei|(?:criei|configurei|defini)\s+(?:um|o|seu)\s+"
                             r"(?:lembrete|alarme)|vou\s+te\s+lembrar|te\s+lembrarei|lembrarei\s+voc[êe])\b"),
    "sent": (_SEND, r"\b(?:enviei|mandei|postei|publiquei|encaminhei|notifiquei)\b"),
    "remembered": (_REMEMBER, r"\b(?:memorizei|vou\s+lembrar|lembrarei|guardei\s+na\s+mem[óo]ria)\b"),
}
_NEGATED = re.compile(r"\b(?:n[ãa]o|nunca|jamais|not|never)\s+(?:\w+\s+)?$", re.I)  # right before the verb


@dataclass(frozen=True, slots=True)
class Claim:
    action: str  # "saved", "scheduled", "sent", "remembered"
    phrase: str  # the words that make the claim
    domains: frozenset[str]  # tool domains whose success would back it


# "I saved it and posted it": a second verb joined to an earlier first-person one
_I_AND = r"\bI\b(?:[^.!?\n]|[.!?](?=\S)){0,100}?\b(?:and|then)\s+(?:then\s+|also\s+)?"  # "notes.md and sent"


def _compile() -> list[tuple[str, frozenset[str], re.Pattern[str]]]:
    rules = [(a, d, re.compile(f"(?:{_I}|{_I_AND}){p}", re.I)) for a, (d, p) in _EN.items()]
    rules += [(a, d, re.compile(p, re.I)) for table in (_EN_FUTURE, _PT) for a, (d, p) in table.items()]
    return rules


_RULES = _compile()


def find_claims(text: str) -> list[Claim]:
    """First-person claims of completed (or promised) actions in ``text``, one per action kind.
    A negated verb (“não salvei”, “I have never sent”) claims nothing; English negations
    (“I could not save”) do not match the past-tense patterns in the first place."""
    found: dict[str, Claim] = {}
    for action, domains, pattern in _RULES:
        for match in pattern.finditer(text):
            if action not in found and not _NEGATED.search(text[max(0, match.start() - 20):match.start()]):
                found[action] = Claim(action, match.group(0).strip(), domains)
    return list(found.values())


def _domain(result: ToolResult) -> str:
    name = result.name.replace("_", ".", 1) if "." not in result.name else result.name
    return name.split(".", 1)[0]


def _backing(results: Iterable[ToolResult]) -> set[str]:
    """Domains that did something (or wait for approval to do it) this turn; dry runs do nothing."""
    domains = set()
    for result in results:
        dry = isinstance(result.output, dict) and result.output.get("dry_run") is True
        if (result.ok and not dry) or result.status == ToolStatus.AWAITING_CONFIRMATION:
            domains.add(_domain(result))
    return domains


def unbacked_claims(text: str, results: Iterable[ToolResult]) -> list[Claim]:
    backed = _backing(results)
    return [c for c in find_claims(text) if not (c.domains & backed)]
