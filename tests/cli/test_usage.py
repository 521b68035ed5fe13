"""``bruce usage`` and ``bruce budget`` read the daemon's database and print; they never make a
new one. (With model calls in it: ``tests/llm/test_budget.py``.)"""

from __future__ import annotations

import argparse
import json
import re

from bruce.cli.usage import budget_command, usage_command
from bruce.clock import SystemClock
from bruce.store import Store


async def test_with_no_database_yet_they_say_how_to_make_one_and_make_none(make_config, tmp_path, capsys):
    config = make_config()
    assert await usage_command(config, argparse.Namespace(days=7, json=False)) == 1
    assert await budget_command(config, argparse.Namespace(budget_command="status")) == 1
    assert "start Bruce once with `bruce run`" in capsys.readouterr().err
    assert not (tmp_path / "bruce.db").exists()


async def test_an_empty_database_has_no_calls_and_no_budget(make_config, capsys):
    config = make_config()
    await (await Store.open(config.storage.path, SystemClock())).close()
    capsys.readouterr()  # what opening it logged
    assert await usage_command(config, argparse.Namespace(days=3, json=True)) == 0
    assert json.loads(capsys.readouterr().out) == {"days": 3, "timezone": "America/Sao_Paulo", "usage": [],
                                                   "cache_hits": {}}
    assert await budget_command(config, argparse.Namespace(budget_command="status")) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "no daily budget (llm.budget.daily_usd and daily_tokens are null)"


async def test_days_out_of_range_is_refused_before_the_database_is_opened(make_config, capsys):
    assert await usage_command(make_config(), argparse.Namespace(days=0, json=False)) == 2
    assert capsys.readouterr().err == "bruce: --days must be between 1 and 3660\n"


async def test_the_budget_resets_at_local_midnight_named(make_config, capsys):
    config = make_config(llm={"budget": {"daily_usd": 2.0}})
    await (await Store.open(config.storage.path, SystemClock())).close()
    capsys.readouterr()
    assert await budget_command(config, argparse.Namespace(budget_command="status")) == 0
    last = capsys.readouterr().out.splitlines()[-1]  # the owner's midnight (assistant.timezone), the zone named
    assert re.fullmatch(r"budget: \$0\.0000 of \$2\.00 \(0%; ok\); resets \d{4}-\d\d-\d\d 00:00 -03 "
                        r"\(America/Sao_Paulo\)", last), last
