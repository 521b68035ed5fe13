"""Artifact rows: stored, read back, listed newest first, and matched against the paths a reply names."""

from __future__ import annotations


async def add(store, artifact_id: str, filename: str = "report.html") -> None:
    await store.artifacts.add(artifact_id=artifact_id, conversation_id=None, turn_id=None, title=f"title {artifact_id}",
                              filename=filename, fmt="html", path=f"/data/artifacts/{artifact_id}/{filename}",
                              size_bytes=12, sha256="ab" * 32)


async def test_an_artifact_is_stored_and_read_back(store):
    await add(store, "a1")
    found = await store.artifacts.get("a1")
    assert found is not None
    assert (found.id, found.title, found.filename, found.format, found.size_bytes) == (
        "a1", "title a1", "report.html", "html", 12)
    assert found.created_at == "2026-12-02T12:00:00.000000+00:00"
    assert await store.artifacts.get("a2") is None


async def test_recent_artifacts_are_newest_first(store, clock):
    for name in ("a1", "a2", "a3"):
        await add(store, name)
        clock.advance(minutes=1)
    assert [a.id for a in await store.artifacts.recent(limit=2)] == ["a3", "a2"]


async def test_only_paths_naming_a_stored_artifact_exist(store):
    await add(store, "a1", "notes.md")
    paths = {"/artifacts/a1/notes.md", "/artifacts/a1/other.md", "/artifacts/a9/notes.md", "/a1/notes.md"}
    assert await store.artifacts.existing_paths(paths) == {"/artifacts/a1/notes.md"}
