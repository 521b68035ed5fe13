"""Pairing requests on the admin page (``bruce.admin.pages.pairing``): listed, approved and
denied by the API or the page's forms, a code used once."""

from __future__ import annotations

from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER


async def test_pairing_requests_can_be_approved_and_denied_here(app, admin):
    codes = iter(["ABCD2345", "WXYZ6789"])
    for sender in ("555", "666"):
        await app.store.pairing.ask(channel="telegram", sender_id=sender, chat_id=sender, display_name=f"user {sender}",
                                    expires_at="2026-12-02T13:00:00.000000+00:00", max_pending=3,
                                    new_code=lambda: next(codes))
    listed = (await (await admin.get("/api/pairing", headers=BEARER)).json())["items"]
    assert [(r["code"], r["sender_id"]) for r in listed] == [("ABCD2345", "555"), ("WXYZ6789", "666")]
    response = await admin.post("/api/pairing/abcd-2345/approve", headers=BEARER)
    assert response.status == 200 and (await response.json())["outcome"] == "approved"
    assert await app.store.pairing.is_paired("telegram", "555")
    again = await admin.post("/api/pairing/ABCD2345/deny", headers=BEARER)
    assert again.status == 400 and "not pending" in (await again.json())["error"]
    await admin.post("/login", data={"token": TOKEN})
    page = await (await admin.get("/pairing")).text()
    assert "WXYZ6789" in page and "ABCD2345" not in page
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    assert (await admin.post("/pairing/WXYZ6789/deny", allow_redirects=False)).status == 403
    response = await admin.post("/pairing/WXYZ6789/deny", data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 303 and not await app.store.pairing.is_paired("telegram", "666")
    assert (await (await admin.get("/api/pairing", headers=BEARER)).json())["items"] == []
