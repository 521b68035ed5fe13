"""Saved documents on the admin page (``bruce.admin.pages.artifacts``): listed and served
sandboxed behind the token; no path in a URL, and no row pointing outside the folder, reaches a
file."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from bruce.admin import AdminServer
from tests.fakes.llm_server import Step
from tests.helpers import ADMIN_TOKEN as TOKEN
from tests.helpers import BEARER, say


@pytest.fixture
async def with_artifacts(app_factory, tmp_path, fake_llm):
    """An app with an artifacts folder, a saved HTML page, and the admin app over it."""
    folder = tmp_path / "artifacts"
    app = await app_factory(tools={"artifacts": {"dir": str(folder)}})
    fake_llm.add(Step.tool_calls(("artifact_save", {"filename": "plan.html", "format": "html", "title": "Plan",
                                                    "content": "<h1>Plan</h1><script>steal()</script>"})),
                 Step.text("Saved."))
    await say(app, "save my plan")
    (record,) = await app.store.artifacts.recent()
    server = AdminServer(store=app.store, clock=app.clock, token=TOKEN, host="127.0.0.1", port=0,
                         artifacts_dir=folder)
    client = TestClient(TestServer(server.app))
    await client.start_server()
    yield app, client, record
    await client.close()


async def test_an_artifact_is_served_sandboxed_behind_the_token(with_artifacts):
    _, client, record = with_artifacts
    url = f"/artifacts/{record.id}/{record.filename}"
    response = await client.get(url, allow_redirects=False)
    assert response.status == 303  # a page: log in first
    response = await client.get(url, headers=BEARER)
    assert response.status == 200 and "<h1>Plan</h1>" in await response.text()
    assert response.headers["Content-Security-Policy"] == "sandbox"
    assert response.headers["Content-Type"].startswith("text/html")
    listing = await (await client.get("/artifacts", headers=BEARER)).text()
    assert f'href="{url}"' in listing and "Plan" in listing


@pytest.mark.parametrize("path", [
    "/artifacts/{id}/..%2f..%2fbruce.db", "/artifacts/{id}/..%2F..%2Fbruce.db", "/artifacts/..%2f..%2f/bruce.db",
    "/artifacts/{id}/%2e%2e%2f%2e%2e%2fbruce.db", "/artifacts/{id}/other.html", "/artifacts/{id}/{name}%00.txt",
    "/artifacts/nosuchid/{name}", "/artifacts/{id}/..", "/artifacts/{id}%2f..%2f..%2fbruce.db/x",
])
async def test_no_path_in_an_artifact_url_reaches_the_file_system(with_artifacts, path):
    _, client, record = with_artifacts
    response = await client.get(path.format(id=record.id, name=record.filename), headers=BEARER)
    assert response.status in (400, 404)
    assert "SQLite" not in await response.text()


async def test_a_row_pointing_outside_the_artifacts_folder_is_not_served(with_artifacts, tmp_path):
    app, client, _ = with_artifacts
    secret = tmp_path / "secret.txt"
    secret.write_text("the owner's secret")
    await app.store.artifacts.add(artifact_id="evil0001", conversation_id=None, turn_id=None, title=None,
                                  filename="secret.txt", fmt="text", path=str(secret), size_bytes=18, sha256="x")
    response = await client.get("/artifacts/evil0001/secret.txt", headers=BEARER)
    assert response.status == 404 and "secret" not in await response.text()
