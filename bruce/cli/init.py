"""``bruce init``: a first ``config.yml`` and a ``.env`` next to it, asked for or given as flags.

Interactive by default (``input()`` prompts with the default in brackets); ``--non-interactive``
takes every answer from flags, for scripts. Secrets never reach the config: the key and tokens
are ``${NAME}`` references, and the ``.env`` written next to it (mode 0600 from its creation)
holds an empty ``NAME=`` line for each value to fill in (and a freshly generated admin token).
An answer that looks like a secret where a variable name is asked is refused.

An existing config or ``.env`` is only replaced with ``--force``; both files are written to
temporary files first and moved into place with ``os.replace``, so an interruption leaves the
old file or the new one, never half of one. The config is validated before it is written.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import secrets
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bruce.config.loader import parse_config
from bruce.config.reader import parse_yaml
from bruce.config.timezone import local_zone_name
from bruce.errors import ConfigError

__all__ = ["add_arguments", "init_command", "detect_ollama", "Setup", "ChannelSetup", "render_config",
           "OLLAMA_TAGS_URL"]

OLLAMA_TAGS_URL = "http://127.0.0.1:11434/api/tags"
SUGGESTED_MODELS = ("openai/gpt-4o-mini", "anthropic/claude-3-5-haiku-latest", "gemini/gemini-2.0-flash")
ADMIN_TOKEN_ENV = "BRUCE_ADMIN_TOKEN"
TOKEN_ENV = {"telegram": "TELEGRAM_BOT_TOKEN", "discord": "DISCORD_BOT_TOKEN"}
_USER_HINT = {
    "telegram": "@userinfobot tells you yours; so does your bot's /id once Bruce runs",
    "discord": "Discord: Settings > Advanced > Developer Mode, then right-click your name > Copy User ID",
}
_ENV_NAME = re.compile(r"[A-Z_][A-Z0-9_]{0,63}")
_USER_ID = re.compile(r"[0-9]{1,24}")
_NO = ("none", "no", "-")

Ask = Callable[[str], str]
Say = Callable[[str], None]


class _Refused(Exception):
    """An answer or a flag that cannot go into the config; the message says why."""


@dataclass(frozen=True, slots=True)
class ChannelSetup:
    name: str  # a key of ``channels`` in the config: telegram, discord
    token_env: str
    users: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Setup:
    model: str
    api_base: str | None
    key_env: str | None
    channels: tuple[ChannelSetup, ...]
    timezone: str

    def env_names(self) -> list[str]:
        """The variables the config refers to, in the order .env lists them (admin token last)."""
        names = [self.key_env] if self.key_env else []
        return names + [c.token_env for c in self.channels]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--non-interactive", action="store_true", help="take every answer from flags")
    parser.add_argument("--model", help="litellm model name (default: openai/gpt-4o-mini)")
    parser.add_argument("--api-base", help="the model's endpoint, e.g. http://127.0.0.1:11434 for Ollama")
    parser.add_argument("--key-env", help="variable that holds the LLM key (default: by provider; 'none': no key)")
    for name in TOKEN_ENV:
        parser.add_argument(f"--{name}-token-env", help=f"enable {name.title()}; variable of its bot token "
                                                       f"(default {TOKEN_ENV[name]})")
        parser.add_argument(f"--{name}-user", action="append", default=[], metavar="ID",
                            help=f"enable {name.title()}; a user id allowed to talk to Bruce (repeatable)")
    parser.add_argument("--timezone", help="IANA zone (default: this machine's)")
    parser.add_argument("--force", action="store_true", help="replace an existing config and .env")
    parser.add_argument("--ollama-url", default=OLLAMA_TAGS_URL, metavar="URL",
                        help=f"where to look for a local Ollama (default {OLLAMA_TAGS_URL})")


# -- checks on answers ---------------------------------------------------------------------------

_KEY_PREFIX = re.compile(r"(?:sk|pk|rk)[-_]|xox[abpr]-|gh[pousr]_|gsk_|AIza")


def _looks_secret(value: str) -> bool:
    """A key or token pasted where a name was asked: a provider's key prefix, a Telegram token's
    ':' or a Discord token's '.', or a long run of letters and digits."""
    long_mixed = len(value) >= 20 and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)
    return bool(_KEY_PREFIX.match(value)) or ":" in value or "." in value or (long_mixed and "_" not in value)


def env_name_problem(value: str) -> str | None:
    """Why ``value`` cannot be the name of an environment variable here, or None."""
    if _looks_secret(value):
        return ("that looks like a key or token itself; give the NAME of the variable that will hold it "
                "(e.g. OPENAI_API_KEY) and put the value in .env, never in the config")
    if not _ENV_NAME.fullmatch(value):
        return "a variable name is upper-case letters, digits and _ (e.g. OPENAI_API_KEY)"
    return None


def _url_problem(value: str) -> str | None:
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return "an address is http(s)://host[:port][/path]"
    if parts.username or parts.password:
        return "no user:password in the address (it would be a secret in the config)"
    return None


def _model_problem(value: str) -> str | None:
    if not value or any(c.isspace() for c in value) or len(value) > 200:
        return "a litellm model name, e.g. openai/gpt-4o-mini"
    if _KEY_PREFIX.match(value):
        return "that looks like a key; give a model name, e.g. openai/gpt-4o-mini"
    return None


def _timezone_problem(value: str) -> str | None:
    try:
        parse_config({"assistant": {"timezone": value}}, environ={})
    except ConfigError:
        return f"{value!r} is not an IANA timezone (e.g. Europe/Berlin, America/Sao_Paulo, UTC)"
    return None


def _users_problem(value: str) -> str | None:
    ids = _split_ids(value)
    if not ids:
        return "at least one user id: nobody else reaches the assistant"
    bad = [i for i in ids if not _USER_ID.fullmatch(i)]
    return f"user ids are numbers (not {bad[0]!r})" if bad else None


def _split_ids(value: str) -> list[str]:
    return [part for part in re.split(r"[,\s]+", value.strip()) if part]


def _default_key_env(model: str) -> str | None:
    from bruce.llm.service import provider_key_env

    return provider_key_env(model)


def _is_ollama(model: str) -> bool:
    return model.startswith(("ollama/", "ollama_chat/"))


def _ollama_base(tags_url: str) -> str:
    parts = urlsplit(tags_url)
    return f"{parts.scheme}://{parts.netloc}"


# -- Ollama ---------------------------------------------------------------------------------------

async def detect_ollama(url: str = OLLAMA_TAGS_URL, *, timeout_s: float = 1.0) -> list[str] | None:
    """The models a local Ollama lists at ``url`` (its /api/tags), or None when nothing answers."""
    import aiohttp

    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session:
            async with session.get(url) as response:
                if response.status != 200:
                    return None
                data = await response.json(content_type=None)
    except (aiohttp.ClientError, TimeoutError, ValueError):
        return None
    models = data.get("models") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return None
    names = [m.get("name") or m.get("model") for m in models if isinstance(m, dict)]
    return [n for n in names if isinstance(n, str) and n and not any(c.isspace() for c in n)]


# -- the questions -------------------------------------------------------------------------------

def _question(ask: Ask, say: Say, text: str, default: str, check: Callable[[str], str | None]) -> str:
    while True:
        answer = ask(f"{text} [{default}]: " if default else f"{text}: ").strip() or default
        problem = check(answer)
        if problem is None:
            return answer
        say(f"  {problem}")


def _ask_model(ask: Ask, say: Say, args: argparse.Namespace, ollama: list[str] | None) -> tuple[str, str | None]:
    base = _ollama_base(args.ollama_url)
    choices = list(SUGGESTED_MODELS)
    say("Which language model should Bruce use? (any model litellm reaches)")
    for i, name in enumerate(choices, start=1):
        say(f"  {i}) {name}")
    default = args.model or "1"
    if ollama:
        choices.append(f"ollama_chat/{ollama[0]}")
        say(f"  {len(choices)}) {choices[-1]}  (a local Ollama answers at {base})")
        default = args.model or str(len(choices))
    elif ollama == []:
        say(f"  (a local Ollama answers at {base} but has no model yet: ollama pull llama3.2)")
    answer = _question(ask, say, "Model: a number above or a litellm model name", default,
                       lambda a: None if a.isdigit() and 1 <= int(a) <= len(choices) else _model_problem(a))
    if answer.isdigit():
        model = choices[int(answer) - 1]
        return model, (base if _is_ollama(model) else None)
    if _is_ollama(answer):
        return answer, _question(ask, say, "Ollama's address", args.api_base or base, _url_problem)
    api_base = _question(ask, say, "API base URL ('none': the provider's own)", args.api_base or "none",
                         lambda a: None if a in _NO else _url_problem(a))
    return answer, (None if api_base in _NO else api_base)


def _ask_key_env(ask: Ask, say: Say, args: argparse.Namespace, model: str) -> str | None:
    default = args.key_env or _default_key_env(model)
    if default is None and _is_ollama(model):
        return None
    answer = _question(ask, say, "Environment variable that will hold the API key ('none': no key)",
                       default or "none", lambda a: None if a.lower() in _NO else env_name_problem(a))
    return None if answer.lower() in _NO else answer


def _ask_channels(ask: Ask, say: Say, args: argparse.Namespace) -> tuple[ChannelSetup, ...]:
    flagged = [n for n in TOKEN_ENV if _channel_flagged(args, n)]
    default = "both" if len(flagged) == 2 else flagged[0] if flagged else "none"
    options = ("telegram", "discord", "both", "none")
    say("Bruce talks to you in the terminal (bruce chat), on Telegram and on Discord.")
    answer = _question(ask, say, "Chat platform: telegram, discord, both or none", default,
                       lambda a: None if a.lower() in options else "one of: " + ", ".join(options)).lower()
    names = list(TOKEN_ENV) if answer == "both" else [] if answer == "none" else [answer]
    found = []
    for name in names:
        title = name.title()
        token_env = _question(ask, say, f"{title}: environment variable that will hold the bot token",
                              getattr(args, f"{name}_token_env") or TOKEN_ENV[name], env_name_problem)
        users = _question(ask, say, f"{title}: your user id(s), comma-separated ({_USER_HINT[name]})",
                          ",".join(getattr(args, f"{name}_user")), _users_problem)
        found.append(ChannelSetup(name, token_env, tuple(_split_ids(users))))
    return tuple(found)


def ask_setup(ask: Ask, say: Say, args: argparse.Namespace, environ: Mapping[str, str],
              ollama: list[str] | None) -> Setup:
    """Every answer from prompts; flags given on the command line are the defaults."""
    model, api_base = _ask_model(ask, say, args, ollama)
    key_env = _ask_key_env(ask, say, args, model)
    channels = _ask_channels(ask, say, args)
    timezone = _question(ask, say, "Timezone", args.timezone or local_zone_name(environ), _timezone_problem)
    return Setup(model, api_base, key_env, channels, timezone)


def _channel_flagged(args: argparse.Namespace, name: str) -> bool:
    return bool(getattr(args, f"{name}_token_env") or getattr(args, f"{name}_user"))


def _checked(value: str, problem: str | None, flag: str) -> str:
    if problem:  # a pasted key is not echoed, not even to the terminal
        raise _Refused(f"{flag}: {problem}" if _looks_secret(value)
                       else f"{flag} {value!r}: {problem}")
    return value


def flags_setup(args: argparse.Namespace, environ: Mapping[str, str]) -> Setup:
    """Every answer from flags (``--non-interactive``); _Refused names the first bad one."""
    model = _checked(args.model or SUGGESTED_MODELS[0], _model_problem(args.model or SUGGESTED_MODELS[0]), "--model")
    api_base = args.api_base or (_ollama_base(args.ollama_url) if _is_ollama(model) else None)
    if api_base:
        _checked(api_base, _url_problem(api_base), "--api-base")
    key_env = args.key_env or _default_key_env(model)
    if key_env and key_env.lower() in _NO:
        key_env = None
    if key_env:
        _checked(key_env, env_name_problem(key_env), "--key-env")
    channels = []
    for name in TOKEN_ENV:
        if not _channel_flagged(args, name):
            continue
        flag = f"--{name}-token-env"
        token_env = getattr(args, f"{name}_token_env") or TOKEN_ENV[name]
        _checked(token_env, env_name_problem(token_env), flag)
        users = getattr(args, f"{name}_user")
        _checked(",".join(users), _users_problem(",".join(users)), f"--{name}-user")
        channels.append(ChannelSetup(name, token_env, tuple(users)))
    timezone = args.timezone or local_zone_name(environ)
    _checked(timezone, _timezone_problem(timezone), "--timezone")
    return Setup(model, api_base, key_env, tuple(channels), timezone)


# -- the files ----------------------------------------------------------------------------------

def _ref(name: str) -> str:
    return "${" + name + "}"


def render_config(setup: Setup) -> str:
    """The config.yml text; every secret is a ``${NAME}`` reference."""
    q = json.dumps  # a JSON string is a YAML double-quoted scalar
    lines = [
        "# Bruce's configuration, written by `bruce init`. Check the whole setup with: bruce doctor",
        "# No secret is written here: \"${NAME}\" is read from the environment (fill in .env next to this file).",
        "# Every other key has a default; docs/configuration.md lists them all. Unknown keys are an error.",
        "assistant:",
        f"  timezone: {q(setup.timezone)}",
        "",
        "llm:",
        f"  model: {q(setup.model)}",
    ]
    if setup.api_base:
        lines.append(f"  api_base: {q(setup.api_base)}")
    if setup.key_env:
        lines.append(f"  api_key: {q(_ref(setup.key_env))}")
    lines += ["", "storage:", "  path: data/bruce.db                # relative to this file's folder", "",
              "channels:"]
    chosen = {c.name: c for c in setup.channels}
    for name in TOKEN_ENV:
        lines.append(f"  {name}:")
        channel = chosen.get(name)
        if channel is None:
            lines.append("    enabled: false")
            continue
        lines += ["    enabled: true", f"    token: {q(_ref(channel.token_env))}",
                  f"    allowed_users: {q(list(channel.users))}   # nobody else reaches the assistant"]
    lines += ["", "admin:", "  enabled: true", "  host: 127.0.0.1                  # keep it local", "  port: 8765",
              f"  token: {q(_ref(ADMIN_TOKEN_ENV))}", ""]
    return "\n".join(lines)


def render_env(setup: Setup, admin_token: str, config_name: str = "config.yml") -> str:
    """The .env text: an empty line for each secret the config (named ``config_name``) refers to,
    and the generated admin token."""
    lines = [
        f"# Secrets for Bruce; {config_name} refers to each as ${{NAME}}. Keep this file private (mode 0600).",
        "# Fill in each empty value, then load the file before starting Bruce:",
        "#   set -a; . ./.env; set +a          (systemd: EnvironmentFile= this file's path)",
        *(f"{name}=" for name in dict.fromkeys(setup.env_names())),
        "# the admin page's login token (http://127.0.0.1:8765), generated by bruce init",
        f"{ADMIN_TOKEN_ENV}={admin_token}",
        "",
    ]
    return "\n".join(lines)


def _write_all(files: list[tuple[Path, str, int]]) -> None:
    """Each (path, text, mode) to a temporary file created with ``mode``, then moved into place."""
    temps: list[tuple[Path, Path]] = []
    try:
        for path, text, mode in files:
            temp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
            fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
            temps.append((temp, path))
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
        while temps:
            temp, path = temps[0]
            os.replace(temp, path)
            temps.pop(0)
    finally:
        for temp, _ in temps:
            temp.unlink(missing_ok=True)


def _existing(paths: list[Path]) -> Path | None:
    return next((p for p in paths if p.exists() or p.is_symlink()), None)


def _bruce_command(config: Path) -> str:
    venv_bruce = Path(sys.executable).parent / "bruce"
    program = str(venv_bruce) if venv_bruce.exists() else "bruce"
    return f"{program} --config {config}"


def _next_steps(say: Say, setup: Setup, config: Path, env: Path, environ: Mapping[str, str]) -> None:
    config, env = config.absolute(), env.absolute()  # `. .env` would search $PATH
    bruce = _bruce_command(config)
    say(f"\nWrote {config} and {env} (mode 0600).")
    say("Next:")
    to_fill = setup.env_names()
    if to_fill:
        say(f"  1. Put your secrets in {env}: {', '.join(dict.fromkeys(to_fill))}")
    else:
        say(f"  1. {env} holds the admin token; nothing else to fill in")
    say(f"     and load them:  set -a; . {env}; set +a   (as a service: EnvironmentFile={env})")
    already = [n for n in to_fill if environ.get(n)]
    if already:
        say(f"     ({', '.join(already)} is set in this shell already: fill in its line or delete it,"
            " or loading .env empties it)")
    say(f"  2. Check the setup: {bruce} doctor")
    say(f"  3. Start Bruce:     {bruce} run     (or: make run CONFIG={config})")
    say(f"     and in another terminal: {bruce} chat")


def init_command(config_path: Path, args: argparse.Namespace, *, ask: Ask | None = None, say: Say = print,
                 environ: Mapping[str, str] | None = None) -> int:
    """``bruce init``: 0 when both files are written, 2 when refused, 1 when cancelled. ``ask``
    defaults to ``input`` (looked up when called)."""
    environ = os.environ if environ is None else environ
    ask = ask or input
    config_path = Path(config_path)
    env_path = config_path.parent / ".env"
    try:
        _refuse_existing([config_path, env_path], args.force)
        if args.non_interactive:
            setup = flags_setup(args, environ)
        else:
            say(f"Setting up Bruce: this writes {config_path} and {env_path}. Enter keeps the [default].")
            ollama = asyncio.run(detect_ollama(args.ollama_url))
            setup = ask_setup(ask, say, args, environ, ollama)
        text = render_config(setup)
        parse_config(parse_yaml(text), environ={})  # what load_config refuses is never written
        _refuse_existing([config_path, env_path], args.force)
        config_path.parent.mkdir(parents=True, exist_ok=True)
        _write_all([(config_path, text, 0o644), (env_path, render_env(setup, secrets.token_urlsafe(32), config_path.name), 0o600)])
    except _Refused as exc:
        print(f"bruce: {exc}", file=sys.stderr)
        return 2
    except EOFError:
        print("\nbruce: init cancelled; nothing was written", file=sys.stderr)
        return 1
    _next_steps(say, setup, config_path, env_path, environ)
    return 0


def _refuse_existing(paths: list[Path], force: bool) -> None:
    found = None if force else _existing(paths)
    if found is not None:
        raise _Refused(f"{found} already exists; not overwriting it (bruce init --force replaces it)")
