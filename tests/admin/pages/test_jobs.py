"""The jobs page (``bruce.admin.pages.jobs``): jobs listed, and changed through the job book,
by the API (Bearer) or the page's forms (cookie and CSRF)."""

from __future__ import annotations

from bruce.values import ConversationId
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER


async def test_jobs_are_listed_and_changed_through_the_scheduler(app, admin):
    job = (await app.jobs.create(ConversationId("test", "c1"), {"execution_mode": "message", "content": "Call Ana",
                                             "in_seconds": 120})).job
    listed = (await (await admin.get("/api/jobs", headers=BEARER)).json())["items"]
    assert listed[0]["job_id"] == job.id and listed[0]["next_run"] == "Wed 2026-12-02 09:02 -03 (America/Sao_Paulo)"
    response = await admin.post(f"/api/jobs/{job.id}/pause", headers=BEARER)
    assert response.status == 200 and (await response.json())["status"] == "paused"
    assert (await admin.post(f"/api/jobs/{job.id}/explode", headers=BEARER)).status == 400
    assert "no job" in (await (await admin.post("/api/jobs/nosuch/pause", headers=BEARER)).json())["error"]
    await admin.post("/login", data={"token": TOKEN})
    assert (await admin.post(f"/jobs/{job.id}/resume", allow_redirects=False)).status == 403  # no CSRF token
    page = await (await admin.get("/jobs")).text()
    csrf = page.split('name="csrf" value="', 1)[1].split('"', 1)[0]
    response = await admin.post(f"/jobs/{job.id}/resume", data={"csrf": csrf}, allow_redirects=False)
    assert response.status == 303
    assert (await app.store.jobs.get(job.id)).status.value == "active"


async def test_an_untrusted_job_is_marked_on_the_schedules_page(app, admin):
    cid = ConversationId("test", "c1")
    steered = (await app.jobs.create(cid, {"execution_mode": "agent", "content": "Remember <b>it</b>.",
                                           "every_seconds": 600}, untrusted=True)).job
    clean = (await app.jobs.create(cid, {"execution_mode": "message", "content": "Call Ana", "in_seconds": 120})).job
    listed = {j["job_id"]: j["untrusted"] for j in (await (await admin.get("/api/jobs", headers=BEARER)).json())["items"]}
    assert listed == {steered.id: True, clean.id: False}
    await admin.post("/login", data={"token": TOKEN})
    page = await (await admin.get("/jobs")).text()
    rows = {row.split("<td>", 2)[1].split("<br>", 1)[0]: row for row in page.split("<tr class=")[1:]}
    assert '<span class="untrusted"' in rows[steered.id] and "untrusted" not in rows[clean.id]
    assert "Remember &lt;b&gt;it&lt;/b&gt;." in rows[steered.id]  # escaped, as ever
