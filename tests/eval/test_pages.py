"""bruce.eval.pages: the local web a case sees, over a real socket: its pages as given (a file
read beside the case file), ``{web}`` turned into the server's address, and a SearXNG-shaped
search answer, written in the case or made from every page."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bruce.eval.cases import Case, CaseError, WebPage, load_cases
from bruce.eval.pages import PageServer, page_body


def case(tmp_path: Path, yaml_text: str) -> Case:
    path = tmp_path / "cases.yml"
    path.write_text(yaml_text, encoding="utf-8")
    return load_cases(path)[0]


PAGES = """
cases:
  - name: menu
    setup:
      web:
        /menu.html: "<html><head><title>Caf&eacute; Menu</title><style>p {color: red}</style></head>
          <body><p>Soup of the day: pumpkin.</p> <a href='{web}/wine.html'>wine</a></body></html>"
        /notes.txt: {body: "plain notes", content_type: "text/plain; charset=latin-1"}
        /gone.html: {body: "moved away", status: 410}
        /menu-file.html: {file: pages/menu.html}
    turns: [{user: "What is the soup at {web}/menu.html?"}]
"""


@pytest.fixture
def pages_case(tmp_path: Path) -> Case:
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "menu.html").write_text("<p>From a file: {web}/x</p>", encoding="utf-8")
    return case(tmp_path, PAGES)


async def test_pages_are_served_with_their_status_type_and_the_servers_address(pages_case: Case) -> None:
    async with PageServer(pages_case) as server, httpx.AsyncClient(base_url=server.base_url) as client:
        assert server.base_url == f"http://{server.host}" and server.host.startswith("127.0.0.1:")
        menu = await client.get("/menu.html")
        assert menu.status_code == 200 and menu.headers["content-type"] == "text/html; charset=utf-8"
        assert f"href='{server.base_url}/wine.html'" in menu.text
        notes = await client.get("/notes.txt")
        assert notes.headers["content-type"] == "text/plain; charset=latin-1" and notes.text == "plain notes"
        assert (await client.get("/gone.html")).status_code == 410
        assert (await client.get("/menu-file.html")).text == f"<p>From a file: {server.base_url}/x</p>"
        missing = await client.get("/other.html")
        assert missing.status_code == 404 and missing.text == "no such page in this eval case"
        assert server.expand("What is the soup at {web}/menu.html?") == (
            f"What is the soup at {server.base_url}/menu.html?")


async def test_without_search_results_every_page_is_one_with_its_title_and_text(pages_case: Case) -> None:
    async with PageServer(pages_case) as server, httpx.AsyncClient(base_url=server.base_url) as client:
        answer = (await client.get("/search", params={"q": "soup"})).json()
    assert answer["query"] == "soup"
    results = {r["url"]: r for r in answer["results"]}
    assert set(results) == {server.base_url + p for p in ("/menu.html", "/notes.txt", "/gone.html", "/menu-file.html")}
    menu = results[server.base_url + "/menu.html"]
    assert menu["title"] == "Café Menu"
    assert menu["content"].startswith("Café Menu Soup of the day: pumpkin. wine") and "color" not in menu["content"]
    assert results[server.base_url + "/notes.txt"]["title"] == "/notes.txt"  # no <title>: its path


async def test_search_results_written_in_the_case_are_answered_as_written(tmp_path: Path) -> None:
    written = case(tmp_path, """
cases:
  - name: search
    setup:
      web: {/a.html: "<p>a</p>"}
      search:
        - {title: "Otters", url: "{web}/a.html", snippet: "Sea otters at {web}"}
        - {title: "Elsewhere", url: "https://example.org/"}
    turns: [{user: "otters?"}]
""")
    async with PageServer(written) as server, httpx.AsyncClient(base_url=server.base_url) as client:
        answer = (await client.get("/search", params={"q": "otters"})).json()
    assert answer["results"] == [
        {"title": "Otters", "url": f"{server.base_url}/a.html", "content": f"Sea otters at {server.base_url}"},
        {"title": "Elsewhere", "url": "https://example.org/", "content": ""}]


def test_a_page_file_that_cannot_be_read_is_a_case_error(tmp_path: Path) -> None:
    with pytest.raises(CaseError, match=r"page file pages/none.html: cannot be read"):
        page_body(WebPage(file="pages/none.html"), tmp_path / "cases.yml")
    assert page_body(WebPage(body="<p>{web}</p>"), tmp_path / "cases.yml") == "<p>{web}</p>"  # replaced when served
