"""The lock files that `make run` and `make test` install from (docs/operations.md, "Installing
from the lock"): every package pinned with its hashes, the compromised litellm releases absent,
every dependency of pyproject.toml locked within its bounds, and pip refusing a file whose hash
differs from the lock's.

The last tests run pip itself on a wheel made in the test, from a local folder: no test reaches a
registry (the install that `make test` runs is what fetches the locked files).
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_LOCK = ROOT / "requirements.lock"
TEST_LOCK = ROOT / "requirements-test.lock"
COMPROMISED_LITELLM = {"1.82.7", "1.82.8"}
HASH = re.compile(r"--hash=sha256:([0-9a-f]{64})")
# pip's words when a downloaded file does not match the lock
MISMATCH = "THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE"


@dataclass(frozen=True)
class Pin:
    requirement: Requirement
    hashes: tuple[str, ...]
    text: str  # the entry as written in the lock, continuation lines joined

    @property
    def name(self) -> str:
        return canonicalize_name(self.requirement.name)

    @property
    def version(self) -> str:
        (spec,) = self.requirement.specifier
        return spec.version


def read_lock(path: Path) -> list[Pin]:
    """The entries of a pip requirements file as pip reads them: comments dropped, lines ended by a
    backslash joined, each entry a requirement followed by its --hash options."""
    entries: list[str] = []
    current = ""
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if not line or line.startswith("#"):
            continue
        current += " " + line.removesuffix("\\").strip()
        if not line.endswith("\\"):
            entries.append(current.strip())
            current = ""
    assert not current, f"{path.name} ends inside a continued line"
    pins = []
    for entry in entries:
        assert not entry.startswith("-"), f"{path.name}: an option instead of a pinned package: {entry!r}"
        requirement_text = entry.split(" --hash=", 1)[0]
        pins.append(Pin(Requirement(requirement_text), tuple(HASH.findall(entry)), entry))
    return pins


def pyproject_dependencies(extra: str | None = None) -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    listed = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return [Requirement(text) for text in listed]


@pytest.mark.parametrize("lock", [RUNTIME_LOCK, TEST_LOCK], ids=lambda p: p.name)
def test_every_package_is_pinned_exactly_with_its_hashes(lock: Path) -> None:
    pins = read_lock(lock)
    assert len(pins) > 50, f"{lock.name} lists only {len(pins)} packages"
    for pin in pins:
        specs = list(pin.requirement.specifier)
        assert len(specs) == 1 and specs[0].operator == "==" and "*" not in specs[0].version, (
            f"{lock.name}: {pin.requirement} is not pinned with =="
        )
        assert pin.hashes, f"{lock.name}: {pin.requirement} has no --hash=sha256:"
        assert not pin.requirement.extras and pin.requirement.url is None, f"{lock.name}: {pin.requirement}"


@pytest.mark.parametrize("lock", [RUNTIME_LOCK, TEST_LOCK], ids=lambda p: p.name)
def test_the_compromised_litellm_releases_are_not_locked(lock: Path) -> None:
    litellm = [pin.version for pin in read_lock(lock) if pin.name == "litellm"]
    assert litellm, f"{lock.name} has no litellm"
    assert not COMPROMISED_LITELLM & set(litellm), f"{lock.name} pins litellm {litellm}"
    (bound,) = [r for r in pyproject_dependencies() if canonicalize_name(r.name) == "litellm"]
    for version in COMPROMISED_LITELLM:  # and a refreshed lock cannot bring them back
        assert version not in bound.specifier, f"pyproject.toml allows litellm {version}: {bound}"


def assert_locked_within_bounds(lock: Path, dependencies: list[Requirement]) -> None:
    pins = read_lock(lock)
    for dependency in dependencies:
        name = canonicalize_name(dependency.name)
        locked = [pin for pin in pins if pin.name == name]
        assert locked, f"{lock.name} lacks {dependency} from pyproject.toml: run `make lock`"
        for pin in locked:
            assert dependency.specifier.contains(pin.version, prereleases=True), (
                f"{lock.name} pins {pin.name}=={pin.version}, outside pyproject.toml's {dependency}: run `make lock`"
            )


def test_every_runtime_dependency_is_locked_within_its_bounds() -> None:
    assert_locked_within_bounds(RUNTIME_LOCK, pyproject_dependencies())
    assert_locked_within_bounds(TEST_LOCK, pyproject_dependencies())


def test_every_test_dependency_is_locked_within_its_bounds() -> None:
    assert_locked_within_bounds(TEST_LOCK, pyproject_dependencies("test"))


def test_the_test_lock_installs_the_same_runtime_pins() -> None:
    runtime = {(pin.name, str(pin.requirement.marker), pin.version, pin.hashes) for pin in read_lock(RUNTIME_LOCK)}
    test = {(pin.name, str(pin.requirement.marker), pin.version, pin.hashes) for pin in read_lock(TEST_LOCK)}
    assert runtime <= test, f"requirements-test.lock differs from requirements.lock for {sorted(runtime - test)}"


def test_pip_and_setuptools_are_locked_so_bruce_builds_without_fetching() -> None:
    for lock in (RUNTIME_LOCK, TEST_LOCK):
        names = {pin.name for pin in read_lock(lock)}
        assert {"pip", "setuptools"} <= names, f"{lock.name} does not pin pip and setuptools"


def test_make_run_and_make_test_install_from_the_locks_with_hashes_required(tmp_path: Path) -> None:
    make = shutil.which("make")
    assert make, "make is needed for `make run` and `make test`"
    for target, lock in (("run", "requirements.lock"), ("test", "requirements-test.lock")):
        # -n prints the commands without running them; -B as on a fresh clone, VENV somewhere new
        shown = subprocess.run(
            [make, "-n", "-B", target, f"VENV={tmp_path / 'venv'}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        installs = [line for line in shown.splitlines() if " -m pip install " in line]
        assert len(installs) == 2, shown
        assert f"--require-hashes -r {lock}" in installs[0], installs[0]
        assert "--no-deps" in installs[1] and installs[1].endswith("-e ."), installs[1]


def tiny_wheel(folder: Path) -> Path:
    """A real, installable wheel made here (no registry): pip checks its hash as it would a locked one."""
    import zipfile

    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / "bruce_lock_probe-1.0-py3-none-any.whl"
    files = {
        "bruce_lock_probe/__init__.py": "",
        "bruce_lock_probe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: bruce-lock-probe\nVersion: 1.0\n",
        "bruce_lock_probe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in files) + "bruce_lock_probe-1.0.dist-info/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, "bruce_lock_probe-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


def pip_download(requirements: Path, index: Path, into: Path) -> subprocess.CompletedProcess[str]:
    """``pip download`` as ``make test`` installs (hashes required), from a local folder only."""
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes", "--only-binary=:all:",
               "--no-index", "--find-links", str(index), "--disable-pip-version-check", "--no-input",
               "-d", str(into), "-r", str(requirements)]
    return subprocess.run(command, capture_output=True, text=True, timeout=180)


def test_a_file_under_its_locked_hash_is_taken(tmp_path: Path) -> None:
    wheel = tiny_wheel(tmp_path / "index")
    requirements = tmp_path / "requirements.txt"
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    requirements.write_text(f"bruce-lock-probe==1.0 --hash=sha256:{digest}\n", encoding="utf-8")
    result = pip_download(requirements, tmp_path / "index", tmp_path / "files")
    assert result.returncode == 0, result.stderr
    assert [p.name for p in (tmp_path / "files").iterdir()] == [wheel.name]


def test_a_changed_hash_fails_the_install_with_pips_message(tmp_path: Path) -> None:
    wheel = tiny_wheel(tmp_path / "index")
    real = hashlib.sha256(wheel.read_bytes()).hexdigest()
    forged = hashlib.sha256(b"not the file the lock was made from").hexdigest()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"bruce-lock-probe==1.0 --hash=sha256:{forged}\n", encoding="utf-8")

    result = pip_download(requirements, tmp_path / "index", tmp_path / "files")

    assert result.returncode != 0
    assert MISMATCH in result.stderr, result.stderr
    assert f"Expected sha256 {forged}" in result.stderr
    got = re.search(r"Got +([0-9a-f]{64})", result.stderr)
    assert got and got.group(1) == real, result.stderr
    assert not (tmp_path / "files").exists() or not any((tmp_path / "files").iterdir())
