"""Which of an MCP server's tools Bruce offers, and as what ``ToolContract``.

Policy comes from the config only (``tool_risk``, ``enabled_tools``, ``disabled_tools``, the
server's ``risk``): a server's descriptions and annotations are untrusted text and never lower a
tool's risk. A tool that cannot be offered (a bad name or schema, too many tools) is left out
with the reason, shown in the server's status.

A tool whose listing names, in its ``_meta`` under ``PREVIEW_META``, another tool of the same
server that the config leaves at ``low`` gets a required dry run: before asking you, Bruce calls
that tool with the same arguments and shows its answer in the approval card, and calls it again
at your yes to check that nothing changed. The preview is the server's own account of what the
call would do; it adds a check and never lowers a risk.

A tool's ``url_args`` (``url_arguments``) are the top-level input properties that may hold a
string and either have a URL-like name or say ``format: uri`` (``uri-reference``, ``iri``,
``iri-reference``, ``url``). A name is URL-like when, split into words (``camelCase``, ``-``,
``.`` and ``_`` separate them) and lower-cased, its last word is one of ``URL_WORDS`` (``url``,
``uri``, ``iri``, ``link``, ``href``, ``endpoint``, ``webhook``, ``callback`` and their plurals),
or the whole name ends with ``url``, ``uri``, ``link`` or ``href`` (``imageurl``,
``permalink``). In a turn that read untrusted text, a value there that the model composed asks
the user first (docs/security.md), whatever the tool's risk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from bruce.actions.registry import ToolRegistry
from bruce.config.schema import MCPServerConfig
from bruce.contracts import DryRun, Risk, ToolContract, ToolHandler
from bruce.errors import ContractError
from tools.mcp import names

__all__ = ["FAILURE_MODES", "MAX_NAME", "MAX_SCHEMA_CHARS", "MAX_TOOLS", "URL_WORDS", "ServerTools", "input_schema",
           "url_arguments"]

MAX_SCHEMA_CHARS = 20_000  # a server's input schema goes into every prompt; a huge one is refused
MAX_TOOLS = 128  # per server: a server listing thousands would fill every prompt
MAX_NAME = 128  # the MCP spec's longest tool name
FAILURE_MODES = ("unavailable", "timeout", "tool_error", "protocol_error")
# A tool's _meta may name, under this key, another tool of the same server that shows what it would
# do with the same arguments; if that one is low risk, the tool gets a required dry run (docs/mcp.md).
PREVIEW_META = "bruce/dry_run_tool"
URL_WORDS = frozenset(w + s for w in ("url", "uri", "iri", "link", "href", "endpoint", "webhook", "callback")
                      for s in ("", "s"))
_URL_ENDINGS = ("url", "uri", "link", "href", "urls", "uris", "links", "hrefs")
_URL_FORMATS = frozenset({"uri", "uri-reference", "iri", "iri-reference", "url"})
_WORD_BREAK = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|[-_.\s]+")


@dataclass(frozen=True, slots=True)
class _Listed:
    remote: str  # the server's name for the tool
    contract: ToolContract


class ServerTools:
    """One server's tools in the registry: registered again at each listing, with what was left out."""

    def __init__(self, server: str, config: MCPServerConfig, registry: ToolRegistry, *,
                 handler: Callable[[str], ToolHandler], unavailable: Callable[[str], Callable[[], str | None]]) -> None:
        self._server = server
        self._config = config
        self._registry = registry
        self._handler = handler  # remote name -> the handler that calls it
        self._unavailable = unavailable  # remote name -> why a call cannot go now, or None
        self._listed: dict[str, _Listed] = {}  # remote name -> what is registered for it now
        self.skipped: dict[str, str] = {}  # remote name -> why it is not offered
        self.previews: dict[str, str] = {}  # remote name -> the low-risk tool that previews it (its dry run)
        self._log = structlog.get_logger(__name__).bind(server=server)

    def offers(self, remote: str) -> bool:
        return remote in self._listed

    def remotes(self) -> list[str]:
        return sorted(self._listed)

    def refresh(self, listing: list[Any]) -> None:
        remotes = [str(t.name) for t in listing]
        listed: dict[str, _Listed] = {}
        self.skipped = {}
        self.previews = {str(t.name): p for t in listing if (p := self._preview(t, remotes)) is not None}
        for tool in listing:
            remote = str(tool.name)
            if not remote or len(remote) > MAX_NAME:
                self.skipped[remote[:MAX_NAME] + "…"] = f"its name is empty or longer than {MAX_NAME} characters"
                continue
            name = names.contract_name(self._server, remote, remotes)
            refusal = self._refusal(remote, name, offered=len(listed))
            if refusal is not None:
                self.skipped[remote] = refusal
                continue
            try:
                contract = self._contract(tool, name)
                self._registry.register(contract, self._handler(remote), unavailable=self._unavailable(remote),
                                        replace=True)
            except (ValueError, ContractError) as exc:
                self.skipped[remote] = str(exc)[:300]
                self._log.warning("mcp.tool_refused", tool=remote[:100], reason=str(exc)[:300])
                continue
            listed[remote] = _Listed(remote, contract)
        self._listed = listed
        self._unknown_names(remotes)

    def status(self) -> list[dict[str, str]]:
        return [{"name": t.contract.name, "wire_name": t.contract.wire_name, "remote": t.remote,
                 "risk": str(t.contract.risk)} for t in sorted(self._listed.values(), key=lambda t: t.contract.name)]

    def _refusal(self, remote: str, name: str, *, offered: int) -> str | None:
        """Why the config (or the number offered already) leaves the tool out, or None."""
        if not self._wanted(remote, name):
            return "left out by enabled_tools / disabled_tools"
        if offered >= MAX_TOOLS:
            return f"the server lists more than {MAX_TOOLS} tools; use enabled_tools to choose"
        return None

    def _wanted(self, remote: str, contract_name: str) -> bool:
        short = contract_name.removeprefix(f"mcp.{self._server}.")
        chosen = self._config.enabled_tools
        if chosen is not None and remote not in chosen and short not in chosen:
            return False
        return remote not in self._config.disabled_tools and short not in self._config.disabled_tools

    def _unknown_names(self, remotes: list[str]) -> None:
        """A tool_risk, enabled_tools or disabled_tools entry that names no tool of the server is
        probably a typo that leaves a risk at its default: say so."""
        known = set(remotes) | {names.contract_name(self._server, r, remotes).removeprefix(f"mcp.{self._server}.")
                                for r in remotes}
        c = self._config
        for key, entries in (("tool_risk", list(c.tool_risk)), ("enabled_tools", c.enabled_tools or []),
                             ("disabled_tools", c.disabled_tools)):
            unknown = sorted(set(entries) - known)
            if unknown:
                self._log.warning("mcp.unknown_tool_names", key=f"mcp_servers.{self._server}.{key}",
                                  names=unknown[:20])

    def _risk(self, remote: str, remotes: list[str]) -> Risk:
        short = names.contract_name(self._server, remote, remotes).removeprefix(f"mcp.{self._server}.")
        c = self._config
        return Risk(c.tool_risk.get(remote) or c.tool_risk.get(short) or c.risk)

    def _preview(self, tool: Any, remotes: list[str]) -> str | None:
        """The tool named in ``tool``'s _meta as its preview, when the server lists it at low risk."""
        meta = getattr(tool, "meta", None)
        preview = meta.get(PREVIEW_META) if isinstance(meta, dict) else None
        if not isinstance(preview, str) or preview == str(tool.name) or preview not in remotes:
            return None
        wanted = self._wanted(preview, names.contract_name(self._server, preview, remotes))
        return preview if wanted and self._risk(preview, remotes) is Risk.LOW else None

    def _contract(self, tool: Any, name: str) -> ToolContract:
        schema = input_schema(tool.input_schema)
        short = name.removeprefix(f"mcp.{self._server}.")
        c = self._config
        risk = Risk(c.tool_risk.get(str(tool.name)) or c.tool_risk.get(short) or c.risk)
        acts = risk not in (Risk.LOW, Risk.MEDIUM)
        return ToolContract(
            name=name,
            description=names.description(self._server, tool.description, short),
            category="mcp",
            risk=risk,
            input_schema=schema,
            output_schema={"type": "object"},
            autonomous=not acts,
            confirmation=acts,
            dry_run=DryRun.REQUIRED if str(tool.name) in self.previews else DryRun.NONE,
            step_up=risk is Risk.CRITICAL,
            side_effects=f"unknown to Bruce: whatever {short} of the MCP server {self._server} does",
            audit_event="mcp.call",
            failure_modes=FAILURE_MODES,
            timeout_s=c.timeout_s,
            permissions=(f"mcp:{self._server}",),
            server=self._server,
            untrusted_output=True,
            url_args=url_arguments(schema),
            wire=self._wire_name(name, short),
        )

    def _wire_name(self, name: str, short: str) -> str:
        """The name the model sees: kept across listings, else a new one no other tool has."""
        existing = self._registry.get(name)
        if existing is not None:
            return existing.contract.wire_name
        taken = {t.contract.wire_name for t in self._registry.tools()}
        return names.wire_name(self._server, short, taken=taken)


def input_schema(schema: Any) -> dict[str, Any]:
    """A tool's input schema as Bruce accepts it, or ValueError saying why not."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        raise ValueError("its input schema is not a JSON Schema object")
    if len(json.dumps(schema, default=str)) > MAX_SCHEMA_CHARS:
        raise ValueError(f"its input schema is longer than {MAX_SCHEMA_CHARS} characters")
    properties = schema.get("properties")
    if isinstance(properties, dict) and "dry_run" in properties:
        raise ValueError("its input has a dry_run field, which Bruce reserves")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        raise ValueError(f"its input schema is not valid JSON Schema: {exc.message[:200]}") from None
    return dict(schema)


def _may_be_string(schema: dict[str, Any]) -> bool:
    """A property that can hold a string (or strings, in a list): no type, or one that allows it."""
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return kind is None or "string" in kinds or "array" in kinds


def _url_like(name: str, schema: dict[str, Any]) -> bool:
    if schema.get("format") in _URL_FORMATS or (isinstance(schema.get("items"), dict)
                                                and schema["items"].get("format") in _URL_FORMATS):
        return True
    words = [w.lower() for w in _WORD_BREAK.split(name) if w]
    return bool(words) and (words[-1] in URL_WORDS or name.lower().endswith(_URL_ENDINGS))


def url_arguments(schema: dict[str, Any]) -> tuple[str, ...]:
    """The input properties whose value is a URL the call sends on (see the module's docstring)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return ()
    return tuple(name for name, sub in properties.items()
                 if isinstance(sub, dict) and _may_be_string(sub) and _url_like(str(name), sub))
