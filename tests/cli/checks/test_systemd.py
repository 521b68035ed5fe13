"""The doctor's check of the systemd unit, over unit files written to tmp_path."""

from __future__ import annotations

import getpass
import sys

from bruce.cli.checks.systemd import check_systemd


def unit_file(tmp_path, service: str):
    unit = tmp_path / "bruce.service"
    unit.write_text(f"[Unit]\nDescription=Bruce\n\n[Service]\n{service}")
    return unit


def test_no_unit_is_not_checked(make_config, tmp_path):
    assert [f.line() for f in check_systemd(make_config(), tmp_path / "none")] == [
        f"– systemd: no unit at {tmp_path / 'none'}"]


def test_a_unit_for_another_user_is_left_to_that_user(make_config, tmp_path):
    unit = unit_file(tmp_path, "User=somebody-else\n")
    (finding,) = check_systemd(make_config(), unit)
    assert finding.line().startswith(f"– systemd: {unit} runs as somebody-else; run doctor as that user")


def test_a_good_unit_is_a_tick(make_config, tmp_path):
    (tmp_path / "config.yml").write_text("{}")
    unit = unit_file(tmp_path, f"User={getpass.getuser()}\nWorkingDirectory={tmp_path}\n"
                               f"ExecStart={sys.executable} --config config.yml run\n"
                               f"ProtectSystem=strict\nReadWritePaths=-{tmp_path}\n")
    config = make_config(tools={"artifacts": {"dir": str(tmp_path / "artifacts")},
                                "files": {"notes_dir": str(tmp_path / "notes")}},
                         console={"socket_path": str(tmp_path / "bruce.sock")})
    assert [f.line() for f in check_systemd(config, unit)] == [
        f"✓ systemd: {unit} paths exist and cover what Bruce writes"]


def test_each_problem_of_a_bad_unit_is_a_cross(make_config, tmp_path):
    unit = unit_file(tmp_path, f"User={getpass.getuser()}\nWorkingDirectory={tmp_path / 'gone'}\n"
                               "ExecStart=/nonexistent/bruce --config missing.yml run\n"
                               "ProtectSystem=strict\nReadWritePaths=/var/lib/elsewhere\n")
    found = [f.text for f in check_systemd(make_config(), unit)]
    assert found[0] == f"systemd: WorkingDirectory {tmp_path / 'gone'} does not exist"
    assert found[1] == "systemd: ExecStart's program /nonexistent/bruce is not an executable"
    assert found[2] == "systemd: ExecStart's --config missing.yml does not exist"
    assert found[3].startswith("systemd: ReadWritePaths does not cover ") and str(tmp_path) in found[3]
