"""The admin page's Memory view, through aiohttp's test client on a real socket: the facts and
summaries listed (page and JSON), one fact or everything forgotten (gone from search too), the
token and CSRF every change needs, and a bad or unknown id a 400 or 404 that says so."""

from __future__ import annotations

import pytest

from bruce.values import FactType
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER


async def remember(app, content: str, type_: FactType = FactType.FACT):
    fact, _ = await app.store.memory.remember(type_, content, confidence=1.0, origin="owner",
                                              conversation_id=None, source_turn_id=None)
    return fact


async def logged_in(admin) -> str:
    """Log in with the cookie; the CSRF token the memory page's forms carry."""
    await admin.post("/login", data={"token": TOKEN})
    page = await (await admin.get("/memory")).text()
    return page.split('name="csrf" value="', 1)[1].split('"', 1)[0]


async def test_the_page_lists_facts_newest_first_and_summaries(app, admin):
    ana = await remember(app, "Daughter is Ana")
    app.clock.advance(minutes=5)
    tea = await remember(app, "Likes green tea", FactType.PREFERENCE)
    await app.store.memory.add_summary("The owner's family: a daughter, Ana.", period_start="2026-12-01T00:00:00Z",
                                       period_end="2026-12-02T00:00:00Z", fact_ids=[ana.id], turn_id=None)
    await logged_in(admin)
    response = await admin.get("/memory")
    assert response.status == 200
    html = await response.text()
    assert '<a href="/memory">Memory</a>' in html
    assert "Daughter is Ana" in html and "Likes green tea" in html and "preference" in html
    assert html.index("Likes green tea") < html.index("Daughter is Ana")  # newest first
    assert f'action="/memory/{ana.id}/forget"' in html and f'action="/memory/{tea.id}/forget"' in html
    assert "The owner&#39;s family: a daughter, Ana." in html
    assert ('<time datetime="2026-12-01T00:00:00+00:00" title="2026-12-01T00:00:00+00:00 (UTC)">'
            "2026-11-30 21:00 -03 (America/Sao_Paulo)</time>") in html  # the owner's zone; UTC on hover
    assert "No remembered facts." not in html

    body = await (await admin.get("/api/memory", headers=BEARER)).json()
    assert [f["content"] for f in body["facts"]] == ["Likes green tea", "Daughter is Ana"]
    assert body["facts"][0] == tea.as_dict() and body["facts"][1]["status"] == "active"
    assert [s["content"] for s in body["summaries"]] == ["The owner's family: a daughter, Ana."]
    assert set(body["summaries"][0]) == {"id", "content", "period_start", "period_end", "created_at", "person"}


async def test_forgetting_a_fact_from_the_page_removes_it(app, admin):
    fact = await remember(app, "Daughter is Ana")
    await remember(app, "Likes green tea")
    csrf = await logged_in(admin)
    response = await admin.post(f"/memory/{fact.id}/forget", data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/memory"
    html = await (await admin.get("/memory")).text()
    assert "Daughter is Ana" not in html and "Likes green tea" in html
    assert await app.store.memory.get(fact.id) is None
    assert await app.store.memory.search("Ana") == []


async def test_forgetting_a_fact_over_the_api(app, admin):
    fact = await remember(app, "Daughter is Ana")
    response = await admin.post(f"/api/memory/{fact.id}/forget", headers=BEARER)
    assert response.status == 200 and await response.json() == {"id": fact.id, "forgotten": 1}
    assert await app.store.memory.search("Ana") == []
    assert (await (await admin.get("/api/memory", headers=BEARER)).json()) == {"facts": [], "summaries": []}


async def test_forget_all_empties_the_memory(app, admin):
    ana = await remember(app, "Daughter is Ana")
    await remember(app, "Likes green tea")
    await app.store.memory.add_summary("A daughter, Ana.", period_start="2026-12-01T00:00:00Z",
                                       period_end="2026-12-02T00:00:00Z", fact_ids=[ana.id], turn_id=None)
    csrf = await logged_in(admin)
    unticked = await admin.post("/memory/forget-all", data={"csrf": csrf}, allow_redirects=False)
    assert unticked.status == 400 and "tick the box" in await unticked.text()
    assert len(await app.store.memory.facts()) == 2  # nothing forgotten without the box ticked
    response = await admin.post("/memory/forget-all", data={"csrf": csrf, "confirm": "yes"}, allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/memory"
    html = await (await admin.get("/memory")).text()
    assert "No remembered facts." in html and "No memory summaries." in html and "Daughter is Ana" not in html
    assert await app.store.memory.facts() == [] and await app.store.memory.summaries() == []
    assert await app.store.memory.search("Ana") == []


async def test_forget_all_over_the_api(app, admin):
    await remember(app, "Daughter is Ana")
    await remember(app, "Likes green tea")
    response = await admin.post("/api/memory/forget-all", headers=BEARER)
    assert response.status == 200 and await response.json() == {"forgotten": 2}
    assert (await (await admin.get("/api/memory", headers=BEARER)).json()) == {"facts": [], "summaries": []}


async def test_without_the_token_or_the_csrf_token_nothing_is_shown_or_forgotten(app, admin):
    fact = await remember(app, "Daughter is Ana")
    response = await admin.get("/memory", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/login"
    response = await admin.get("/api/memory")
    assert response.status == 401 and "admin token is required" in (await response.json())["error"]
    assert (await admin.get("/api/memory", headers={"Authorization": "Bearer wrong-token"})).status == 401
    for path in (f"/api/memory/{fact.id}/forget", "/api/memory/forget-all"):
        assert (await admin.post(path)).status == 401
        assert (await admin.post(path, headers={"Authorization": "Bearer wrong-token"})).status == 401
    for path in (f"/memory/{fact.id}/forget", "/memory/forget-all"):
        response = await admin.post(path, data={"confirm": "yes"}, allow_redirects=False)
        assert response.status == 303 and response.headers["Location"] == "/login"

    csrf = await logged_in(admin)
    for path in (f"/memory/{fact.id}/forget", f"/api/memory/{fact.id}/forget"):
        response = await admin.post(path, allow_redirects=False)
        assert response.status == 403 and "CSRF" in (await response.json())["error"]
        assert (await admin.post(path, data={"csrf": "forged"}, allow_redirects=False)).status == 403
    for path in ("/memory/forget-all", "/api/memory/forget-all"):
        response = await admin.post(path, data={"confirm": "yes"}, allow_redirects=False)
        assert response.status == 403
    assert [f.id for f in await app.store.memory.facts()] == [fact.id]  # still remembered
    assert len(await app.store.memory.search("Ana")) == 1
    response = await admin.post(f"/api/memory/{fact.id}/forget", headers={"X-CSRF-Token": csrf})
    assert response.status == 200 and await app.store.memory.get(fact.id) is None  # a session + CSRF header works


@pytest.mark.parametrize("bad", ["abc", "0", "-1", "1.5", "%C2%B2", "9" * 19])
async def test_an_id_that_is_not_a_positive_whole_number_is_a_400_naming_it(app, admin, bad):
    await remember(app, "Daughter is Ana")
    response = await admin.post(f"/api/memory/{bad}/forget", headers=BEARER)
    assert response.status == 400
    assert (await response.json())["error"].startswith("id: ") and "positive whole number" in (await response.json())["error"]
    csrf = await logged_in(admin)
    page = await admin.post(f"/memory/{bad}/forget", data={"csrf": csrf}, allow_redirects=False)
    assert page.status == 400 and "positive whole number" in await page.text() and "Daughter is Ana" in await page.text()
    assert len(await app.store.memory.facts()) == 1


async def test_an_unknown_fact_is_a_404_naming_it(app, admin):
    fact = await remember(app, "Daughter is Ana")
    response = await admin.post("/api/memory/999/forget", headers=BEARER)
    assert response.status == 404 and (await response.json())["error"] == "no memory fact 999"
    csrf = await logged_in(admin)
    page = await admin.post("/memory/999/forget", data={"csrf": csrf}, allow_redirects=False)
    assert page.status == 404 and "no memory fact 999" in await page.text()
    assert await app.store.memory.get(fact.id) is not None


async def test_the_page_shows_whose_each_fact_is(app, admin):
    await remember(app, "Daughter is Ana")
    await app.store.memory.remember(FactType.FACT, "Plays chess", confidence=1.0, origin="tool", conversation_id=None,
                                    source_turn_id=None, person="telegram:222")
    await logged_in(admin)
    html = await (await admin.get("/memory")).text()
    assert "<th>Person</th>" in html and "<td>telegram:222</td>" in html and "<td>owner</td>" in html
    body = await (await admin.get("/api/memory", headers=BEARER)).json()
    assert {f["content"]: f["person"] for f in body["facts"]} == {"Daughter is Ana": "owner",
                                                                  "Plays chess": "telegram:222"}
