"""Eval case files: what loads, and a precise error (file, case, key path) for what does not."""

from __future__ import annotations

from pathlib import Path

import pytest

from bruce.eval.cases import MAX_FILE_BYTES, CaseError, load_cases, select, unknown_tools

GOOD = """
cases:
  - name: next-friday
    tags: [clock, dates]
    setup: {clock: "2026-03-07T10:00:00-03:00", memory: ["Daughter is Ana"], web: {/a.html: "<p>hi</p>"}}
    turns:
      - user: What's the date next Friday?
        expect:
          tools_called: [clock_now, {tool: proactive.create, args: {in_seconds: {between: [60, 120]}}}]
          must_say: ['\\b13\\b']
          job: {mode: message, cron: "0 9 * * MON-FRI"}
  - name: greeting
    tags: [style]
    turns: [{user: Hi}]
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def problems(path: Path) -> str:
    with pytest.raises(CaseError) as caught:
        load_cases(path)
    return str(caught.value)


def test_a_good_file_loads_with_its_shorthands(tmp_path):
    write(tmp_path, "dates.yml", GOOD)
    write(tmp_path, "rubric.yml", "version: 1\n")  # the judge's rubric lives next to the cases: not a case file
    (friday, greeting) = load_cases(tmp_path)
    assert friday.name == "next-friday" and friday.file == tmp_path / "dates.yml"
    expect = friday.spec.turns[0].expect
    assert [t.name for t in expect.tools_called] == ["clock.now", "proactive.create"]  # the wire name is accepted
    assert expect.grounded is True and expect.job is not None and expect.job.status == "active"
    assert friday.spec.setup.memory[0].content == "Daughter is Ana" and friday.spec.setup.web["/a.html"].body
    assert greeting.spec.turns[0].expect.tools_called == []
    assert [c.name for c in select([friday, greeting], ["style"])] == ["greeting"]
    assert len(select([friday, greeting], [])) == 2


def test_each_problem_names_the_file_the_case_and_the_key_path(tmp_path):
    path = write(tmp_path, "bad.yml", """
cases:
  - name: next-friday
    turns:
      - user: hello
        expect:
          must_say: ['[13']
          max_chars: 0
          tools_called: [{tool: clock.now, args: {x: {almost: 1}}}]
          job: {at: "2026-03-05T08:00:00", cron: "0 9 * * 1"}
          tool_called: []
  - name: Bad Name
    setup: {clock: "2026-03-07T10:00:00"}
    turns: []
""")
    text = problems(path)
    prefix = f"{path}: case 'next-friday' (cases[0]): turns[0].expect."
    assert f"{prefix}must_say[0]: not a valid regular expression (unterminated character set" in text
    assert f"{prefix}max_chars: must be at least 1" in text
    assert f"{prefix}tools_called[0].args.x: a matcher is a plain value or one of" in text
    assert f"{prefix}job: give at most one of at, in_seconds, cron, every_seconds (got at, cron)" in text
    assert f"{prefix}tool_called: unknown key" in text
    assert f"{path}: case 'Bad Name' (cases[1]): name: must be lower-case letters" in text
    assert f"{path}: case 'Bad Name' (cases[1]): setup.clock: give a UTC offset" in text
    assert f"{path}: case 'Bad Name' (cases[1]): turns: needs at least 1 item(s)" in text


@pytest.mark.parametrize(("text", "expected"), [
    ("cases:\n  - name: a\n    turns: [{user: hi}\n", "not valid YAML at line"),
    ("- name: a\n", "a case file is a mapping with one key, cases"),
    ("cases: []\n", "cases: must be a list of at least one case"),
    ("cases:\n  - name: a\n    name: b\n    turns: [{user: hi}]\n", "cases[0].name: duplicate key at line 3"),
    ("cases:\n  - name: a\n    turns: [{user: hi, expect: {job: {cron: '61 * * * *'}}}]\n", "turns[0].expect.job: cron"),
    ("cases:\n  - name: a\n    setup: {web: {/a.html: {file: pages/missing.html}}}\n    turns: [{user: hi}]\n",
     'setup.web["/a.html"].file: no file'),
    ("cases:\n  - name: a\n    setup: {timezone: Mars/Olympus}\n    turns: [{user: hi}]\n", "setup.timezone: unknown zone"),
    ("cases:\n  - name: a\n    setup: {clock: '0001-01-01T00:00:00+00:00'}\n    turns: [{user: hi}]\n",
     "setup.clock: give a moment between the years 1971 and 9000"),  # Bruce's date arithmetic overflows
    ("cases:\n  - name: a\n    turns: [{user: \"  \\n \"}]\n", "turns[0].user: must not be blank"),  # Bruce ignores it
    # a pattern that matches an empty reply holds (must_say) or fails (must_not_say) whatever the reply: '44|' is a typo
    ("cases:\n  - name: a\n    turns: [{user: hi, expect: {must_say: ['44[.,]19|']}}]\n",
     "turns[0].expect.must_say[0]: matches an empty text, so it matches every reply"),
    ("cases:\n  - name: a\n    turns: [{user: hi, expect: {must_not_say: ['']}}]\n",
     "turns[0].expect.must_not_say[0]: matches an empty text, so it matches every reply"),
    ("cases:\n  - name: a\n    turns: [{user: hi, expect: {tools_called: [{tool: web.search, "
     "args: {query: {matches: 'x*'}}}]}}]\n",
     "turns[0].expect.tools_called[0].args.query: matches an empty text"),
    ("cases:\n  - name: a\n    setup: {files: {../escape.md: x}}\n    turns: [{user: hi}]\n",
     'setup.files["../escape.md"]: a file path is relative to the notes folder, without \'..\''),
])
def test_malformed_files_are_refused_with_where(tmp_path, text, expected):
    path = write(tmp_path, "case.yml", text)
    message = problems(path)
    assert message.startswith(f"{path}: ") and expected in message, message


def test_the_rubric_given_as_the_case_file_says_what_it_is(tmp_path):
    rubric = write(tmp_path, "rubric.yml", "version: 1\ninstructions: grade\ncriteria: {naturalness: x}\n")
    assert problems(rubric) == (f"{rubric}: this is the judge's rubric, not a case file: give a case file or the "
                                f"folder of them ({tmp_path})")


def test_names_are_unique_across_files(tmp_path):
    write(tmp_path, "a.yml", "cases:\n  - name: same\n    turns: [{user: one}]\n")
    write(tmp_path, "b.yml", "cases:\n  - name: same\n    turns: [{user: two}]\n")
    assert f"{tmp_path / 'b.yml'}: case 'same': the name is already used in {tmp_path / 'a.yml'}" in problems(tmp_path)


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path):
    path = tmp_path / "huge.yml"
    path.write_bytes(b"cases:\n" + b"#" * (10 * MAX_FILE_BYTES))  # 10 MB
    assert problems(path) == f"{path}: 10.0 MB is larger than the 1 MB a case file may be; split it into several files"


def test_a_missing_path_or_an_empty_folder_says_so(tmp_path):
    assert problems(tmp_path / "nowhere") == f"{tmp_path / 'nowhere'}: no such file or folder of eval cases"
    assert problems(tmp_path) == f"{tmp_path}: no *.yml case files in this folder"


def test_an_expectation_naming_no_tool_is_found(tmp_path):
    write(tmp_path, "t.yml", "cases:\n  - name: a\n    turns: [{user: hi, expect: {tools_not_called: [web.serch]}}]\n")
    cases = load_cases(tmp_path)
    assert unknown_tools(cases, ["web.search", "clock.now"]) == [
        f"{tmp_path / 't.yml'}: case 'a': turns[0].expect.tools_not_called[0].tool: no tool named 'web.serch'"]
    assert unknown_tools(cases, ["web.serch"]) == []


def test_an_mcp_tool_that_must_be_called_is_refused_as_it_never_can_be(tmp_path):
    """MCP servers are not started in an eval run: such a case would fail forever."""
    write(tmp_path, "t.yml", "cases:\n  - name: a\n    turns: [{user: hi, expect: {tools_called: [mcp.github.search], "
                             "tools_not_called: [mcp.shell.run]}}]\n")
    assert unknown_tools(load_cases(tmp_path), ["web.search"]) == [
        f"{tmp_path / 't.yml'}: case 'a': turns[0].expect.tools_called[0].tool: 'mcp.github.search' is an MCP tool, "
        "and MCP servers are not started in an eval run"]
