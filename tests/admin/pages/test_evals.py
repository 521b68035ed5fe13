"""The admin page's Evals tab, through aiohttp's test client on a real socket: the runs of
``bruce eval run`` listed behind the admin token (page and JSON), one run's cases, failures, judge
scores and transcripts (escaped), a garbled run folder shown as such, and no path from a URL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from bruce.eval.cases import load_cases
from bruce.eval.judge import Judge, judge_endpoint, load_rubric
from bruce.eval.report import new_run_folder, run_record, write_run
from bruce.eval.runner import RunSettings, run_cases
from tests.eval.test_judge import RUBRIC
from tests.fakes.eval_model import FULL_MARKS, ScriptedModel
from tests.fakes.llm_server import Step
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER

CASES = """
cases:
  - name: tip
    description: The calculator, not mental arithmetic.
    turns:
      - user: "What is 18% of 245.50?"
        expect: {tools_called: [math.calculate]}
  - name: hello
    turns:
      - user: "Hi!"
"""
SCRIPTS = {"tip": [[{"say": "About 44.19 <script>alert(1)</script>"}]], "hello": [[{"say": "Hi there!"}]]}


@pytest.fixture
async def runs(tmp_path, make_config, fake_llm):
    """eval-runs/ with one real run (one case failed, scored by a judge) and a garbled folder."""
    path = tmp_path / "cases.yml"
    path.write_text(CASES, encoding="utf-8")
    cases = load_cases(path)
    verdict = json.dumps({**FULL_MARKS, "continuity": {"score": 3, "reason": "Misses the <b>point</b>."}})
    fake_llm.responder = ScriptedModel(cases, SCRIPTS, judge_model="judge",
                                       judge=lambda body: Step.text(verdict)).respond
    config = make_config()
    judge = await Judge.open(load_rubric(RUBRIC), judge_endpoint("openai/judge", config, "openai/m"), config)
    try:
        outcomes = await run_cases(cases, config, RunSettings(model="openai/m", environ={}), judge=judge)
    finally:
        await judge.close()
    started = datetime(2026, 3, 6, 12, 0, tzinfo=UTC)
    folder = new_run_folder(tmp_path / "eval-runs", started)
    record = run_record(run_id=folder.name, started_at=started, finished_at=started, model="openai/m", api_base=None,
                        cases_path=str(path), tags=[], repeat=1, jobs=4, judge=judge.record(), outcomes=outcomes)
    write_run(folder, record)
    garbled = tmp_path / "eval-runs" / "2026-03-07T08-00-00Z"
    garbled.mkdir()
    (garbled / "run.json").write_text("{cut sh")
    return tmp_path / "eval-runs", folder.name


@pytest.fixture
async def client(app, runs):
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0,
                         eval_runs_dir=runs[0])
    test_client = TestClient(TestServer(server.app))
    await test_client.start_server()
    yield test_client
    await test_client.close()


async def test_the_runs_are_behind_the_token(client):
    assert (await client.get("/api/evals")).status == 401
    response = await client.get("/evals", allow_redirects=False)
    assert response.status == 303 and response.headers["Location"] == "/login"


async def test_the_runs_are_listed_newest_first_with_their_totals(client, runs):
    folder, run_id = runs
    body = await (await client.get("/api/evals", headers=BEARER)).json()
    garbled, good = body["items"]
    assert garbled["id"] == "2026-03-07T08-00-00Z" and "not a run file (it is not valid JSON)" in garbled["error"]
    assert good["id"] == run_id and good["model"] == "openai/m" and good["judge"] == "openai/judge"
    assert (good["totals"]["passed"], good["totals"]["failed"]) == (1, 1)

    await client.post("/login", data={"token": TOKEN})
    html = await (await client.get("/evals")).text()
    assert '<a href="/evals">Evals</a>' in html  # the tab
    assert f'<a href="/evals/{run_id}">{run_id}</a>' in html and "not a run file" in html
    assert "<td>openai/judge</td>" in html and "<td>4/5</td>" in html  # code checks passed / all


async def test_one_run_shows_cases_failures_scores_and_transcripts_escaped(client, runs):
    _, run_id = runs
    run = await (await client.get(f"/api/evals/{run_id}", headers=BEARER)).json()
    assert run["id"] == run_id and [c["name"] for c in run["cases"]] == ["tip", "hello"]
    await client.post("/login", data={"token": TOKEN})
    html = await (await client.get(f"/evals/{run_id}")).text()
    assert "1 passed, 1 failed (4/5 code checks passed)" in html
    assert "turn 1: tool math.calculate was not called (no tool was called)" in html
    assert "<td>continuity</td><td>3.00</td>" in html
    assert "continuity <strong>3</strong>: Misses the &lt;b&gt;point&lt;/b&gt;." in html
    assert "About 44.19 &lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script>alert" not in html
    assert "The calculator, not mental arithmetic." in html


@pytest.mark.parametrize("name", ["nope", "..%2f..%2fbruce.db", "..%2Feval-runs", "2026-03-07T08-00-00Z", ".hidden"])
async def test_an_unknown_or_unreadable_run_is_a_404(client, name):
    for path in (f"/api/evals/{name}", f"/evals/{name}"):
        response = await client.get(path, headers=BEARER)
        assert response.status == 404 and "cases" not in await response.text(), path
    response = await client.get("/api/evals/nope", headers=BEARER)
    assert (await response.json()) == {"error": "no eval run 'nope'"}


async def test_without_a_runs_folder_the_tab_says_how_to_make_one(app):
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0)
    test_client = TestClient(TestServer(server.app))
    await test_client.start_server()
    try:
        assert (await (await test_client.get("/api/evals", headers=BEARER)).json()) == {"runs_dir": None, "items": []}
        html = await (await test_client.get("/evals", headers=BEARER)).text()
        assert "No eval runs yet: <code>bruce eval run --model MODEL</code> writes one." in html
    finally:
        await test_client.close()


async def test_bruce_run_serves_the_configured_runs_folder(app_factory, runs):
    folder, run_id = runs
    app = await app_factory(admin={"port": 0, "token": TOKEN}, eval={"runs_dir": str(folder)})
    url = await app.start_admin()
    async with aiohttp.ClientSession() as session, session.get(f"{url}/api/evals", headers=BEARER) as response:
        assert response.status == 200
        assert run_id in [r["id"] for r in (await response.json())["items"]]


async def test_a_run_of_the_right_format_but_the_wrong_shape_is_listed_as_garbled_not_a_500(client, runs):
    folder, run_id = runs
    run = json.loads((folder / run_id / "run.json").read_text())
    del run["totals"]  # edited by hand, or written by something else
    run["cases"][0]["attempts"][0]["checks"] = None
    cut = folder / "2026-03-08T08-00-00Z"
    cut.mkdir()
    (cut / "run.json").write_text(json.dumps(run))
    items = (await (await client.get("/api/evals", headers=BEARER)).json())["items"]
    assert items[0]["id"] == cut.name and "not a run file of this version" in items[0]["error"]
    response = await client.get("/evals", headers=BEARER)
    assert response.status == 200 and "not a run file of this version" in await response.text()
    for path in (f"/evals/{cut.name}", f"/api/evals/{cut.name}"):
        assert (await client.get(path, headers=BEARER)).status == 404
