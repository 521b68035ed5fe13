"""The value rules, shared by the config and the tools that enforce them (bruce/config/rules.py)."""

from __future__ import annotations

import pytest

from bruce.cli.main import main
from bruce.config.loader import parse_config
from bruce.config.rules import (
    MIN_ADMIN_TOKEN,
    admin_token_problem,
    allowed_host,
    blank_to_none,
    host_entry,
    host_header_allowed,
    ids_as_text,
    plain_path,
    unknown_overrides,
    url_problem,
)
from bruce.errors import ConfigError
from tools.http_post import http_post_tool


def problems(data) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data, environ={})
    return info.value.problems


UNUSABLE_URLS = [
    ("https://user:secret-pw@hooks.example/x", "user:password"),
    ("http:///x", "no host"),
    ("https://xn--a.example/hook", "host"),
    ("https://exa\u00e4mple..com/hook", "host"),
    ("https://hooks.example/a/%2e%2e/b", "'.' or '..'"),
    ("ftp://hooks.example/x", "http(s)"),
]


@pytest.mark.parametrize(("url", "why"), UNUSABLE_URLS)
def test_unusable_allowed_urls_are_refused_by_the_config_itself(url, why):
    found = problems({"tools": {"http_post": {"allowed_urls": ["https://ok.example/hook", url]}}})
    assert len(found) == 1 and found[0].startswith("tools.http_post.allowed_urls[1]: ") and why in found[0], found
    assert "secret-pw" not in found[0]


@pytest.mark.parametrize(("url", "why"), UNUSABLE_URLS)
def test_the_tool_refuses_the_same_urls_with_the_same_rule(url, why):
    problem = url_problem(url)
    assert problem is not None and why in problem
    with pytest.raises(ConfigError, match=r"tools\.http_post\.allowed_urls\[0\]"):
        http_post_tool(allowed_urls=[url])


@pytest.mark.parametrize("url", ["https://hooks.example/x", "http://127.0.0.1:8080/a?b=c", "http://[::1]/x",
                                 "https://b\u00fccher.example/hook", "http://host_name.local./x"])
def test_usable_urls_pass(url):
    assert url_problem(url) is None
    assert parse_config({"tools": {"http_post": {"allowed_urls": [url]}}}, environ={}).tools.http_post.allowed_urls == [url]


@pytest.mark.parametrize(("path", "expected"), [
    ("/hooks/x", "/hooks/x"), ("/", "/"), ("/a%20b", "/a b"), ("/hooks/", "/hooks/"),
    ("/hooks/../admin", None), ("/hooks/%2e%2e/admin", None), ("/hooks/%252e%252e/admin", None),
    ("/hooks/..;/admin", None), ("/hooks\\..\\admin", None), ("/hooks//admin", None), ("/a%2fb", None),
    ("/\uff0e\uff0e/admin", None), ("/a%ffb", None), ("/a%0ab", None), ("/%25252525252e", None),
])
def test_a_path_a_server_could_read_otherwise_is_no_plain_path(path, expected):
    assert plain_path(path) == expected


def test_a_host_is_written_as_the_allow_list_writes_it():
    assert host_entry("Example.ORG") == "example.org"
    assert host_entry("example.org", 8080) == "example.org:8080"
    assert host_entry("::1") == "[::1]" and host_entry("::1", 8443) == "[::1]:8443"
    for host, port in [("example.org", None), ("127.0.0.1", 1), ("::1", 8443)]:
        assert allowed_host(host_entry(host, port)) == host_entry(host, port)  # what the config accepts as written


@pytest.mark.parametrize("bad", ["http://x", "a b", "host:port", "[::1", ""])
def test_an_allowed_host_is_a_host_or_host_port(bad):
    with pytest.raises(ValueError, match="is not a host name or host:port"):
        allowed_host(bad)
    assert allowed_host("  Example.ORG:8080 ") == "example.org:8080"


def test_small_value_rules():
    assert blank_to_none("  ") is None and blank_to_none("") is None and blank_to_none("x") == "x"
    assert blank_to_none(0) == 0
    assert ids_as_text([1, "2"]) == ["1", "2"] and ids_as_text("7") == "7"


def test_an_override_must_name_a_known_tool():
    tools = parse_config({"tools": {"overrides": {"web.serch": {"enabled": False}, "web.search": {},
                                                  "mcp.home.lights": {}}}}, environ={}).tools
    assert unknown_overrides(tools, ["web.search", "web.read_url", "web.search"]) == [
        "tools.overrides.web.serch: unknown tool (known tools: web.read_url, web.search)"]  # MCP tools: once connected


def test_config_check_refuses_what_run_refuses(tmp_path, capsys):
    path = tmp_path / "config.yml"
    path.write_text("tools: {overrides: {web.serch: {enabled: false}}}\n")
    assert main(["--config", str(path), "config", "check"]) == 2
    err = capsys.readouterr().err
    assert "tools.overrides.web.serch: unknown tool" in err and "web.search" in err and "Traceback" not in err


@pytest.mark.parametrize("header,allowed,verdict", [
    ("127.0.0.1:8765", (), True), ("localhost", (), True), ("[::1]:1", (), True), ("127.9.9.9", (), True),
    ("LocalHost:80", (), True), ("bruce.example.org", ("bruce.example.org",), True),
    ("bruce.example.org:443", ("bruce.example.org",), True), ("proxy:8443", ("proxy:8443",), True),
    ("proxy:9", ("proxy:8443",), False), ("proxy", ("proxy:8443",), False), ("evil.example", (), False),
    ("localhost.evil.example", (), False), ("127.0.0.1.nip.io", (), False), ("0.0.0.0:8765", (), False),
    ("", (), False), (None, (), False), ("127.0.0.1@evil.example", (), False), ("[::1", (), False),
    ("evil.example/127.0.0.1", (), False), ("::1", (), False),
])
def test_the_host_header_names_this_machine_or_an_allowed_host(header, allowed, verdict):
    assert host_header_allowed(header, allowed) is verdict


def test_an_admin_token_has_at_least_32_characters():
    assert admin_token_problem(None) is None and admin_token_problem("x" * MIN_ADMIN_TOKEN) is None
    assert MIN_ADMIN_TOKEN == 32
    assert (admin_token_problem("x" * 31) or "").startswith("admin.token: at least 32 characters (it has 31)")
