"""Fail closed: a policy that cannot be read or parsed, a missing secret on a server
database, or a short secret stops startup with a clear message and no traceback:
``locky check`` and ``locky serve`` exit 2, and ``create_app`` raises ``SettingsError``.
Nothing ever starts listening with a fallback policy.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from locky.app import create_app
from locky.settings import SettingsError
from locky.testing import TEST_SECRET, make_settings
from support.server import free_port

def shipped_policy(tmp_path: Path) -> Path:
    """A copy of the shipped policy files to break."""
    import locky_casbin.policy_files as policy_files

    target = tmp_path / "policy"
    target.mkdir()
    source = policy_files.policy_dir(None)
    for name in ("model.conf", "policy.csv"):
        shutil.copy(source / name, target / name)
    return target


def start_locky(tmp_path: Path, command: list[str], env: dict[str, str]) -> subprocess.Popen:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    return subprocess.Popen([sys.executable, "-m", "locky.cli.main", *command], cwd=tmp_path, env={**clean, **env},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def run_locky(tmp_path: Path, command: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    process = start_locky(tmp_path, command, env)
    try:
        out, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 9)
            process.wait()
    return process.returncode, out, err


def refused(tmp_path: Path, env: dict[str, str], *expected: str) -> None:
    """``locky check`` and ``locky serve`` (run side by side) both stop with exit code 2
    and a message naming what to fix; the server never listens."""
    port = free_port()
    commands = (["check"], ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"])
    processes = [start_locky(tmp_path, command, env) for command in commands]
    try:
        for command, process in zip(commands, processes):
            out, err = process.communicate(timeout=60)
            assert process.returncode == 2, (command, process.returncode, out, err)
            assert err.startswith("locky: "), err
            assert "Traceback" not in err, err
            for text in expected:
                assert text in err, (text, err)
    finally:
        for process in processes:
            if process.poll() is None:
                os.killpg(process.pid, 9)
                process.wait()
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0, "something listens after a refused start"


def sqlite_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"LOCKY_DATABASE_URL": f"sqlite:///{tmp_path / 'locky.sqlite'}", "LOCKY_JWT_SECRET": TEST_SECRET,
            **extra}


def breakages():
    def model_garbage(d: Path):
        (d / "model.conf").write_text("this is not a casbin model\n")
        return "does not parse"

    def model_without_matchers(d: Path):
        text = (d / "model.conf").read_text()
        (d / "model.conf").write_text(text.split("[matchers]")[0])
        return "does not parse"

    def policy_bad_arity(d: Path):
        with (d / "policy.csv").open("a") as handle:
            handle.write("\np, admin, *, users\n")
        return "policy.csv"

    def policy_unknown_type(d: Path):
        with (d / "policy.csv").open("a") as handle:
            handle.write("\nx, admin, *, users, read\n")
        return "unknown line type"

    def policy_empty_value(d: Path):
        with (d / "policy.csv").open("a") as handle:
            handle.write("\np, user, , users, write\n")
        return "policy.csv"

    def policy_not_utf8(d: Path):
        (d / "policy.csv").write_bytes(b"p, admin, *, *, *\n\xff\xfe\n")
        return "cannot read policy file"

    def policy_is_a_directory(d: Path):
        (d / "policy.csv").unlink()
        (d / "policy.csv").mkdir()
        return "cannot read policy file"

    def policy_missing(d: Path):
        (d / "policy.csv").unlink()
        return "cannot read policy file"

    def model_missing(d: Path):
        (d / "model.conf").unlink()
        return "cannot read policy file"

    def policy_unreadable(d: Path):
        if os.geteuid() == 0:
            pytest.skip("root reads files whatever their mode; the directory and encoding cases cover this")
        (d / "policy.csv").chmod(0)
        return "cannot read policy file"

    return {f.__name__: f for f in (model_garbage, model_without_matchers, policy_bad_arity, policy_unknown_type,
                                    policy_empty_value, policy_not_utf8, policy_is_a_directory, policy_missing,
                                    model_missing, policy_unreadable)}


BREAKAGES = breakages()


@pytest.mark.parametrize("breakage", list(BREAKAGES))
def test_broken_policy_stops_create_app(tmp_path, breakage):
    policy = shipped_policy(tmp_path)
    expected = BREAKAGES[breakage](policy)
    with pytest.raises(SettingsError, match=expected) as raised:
        create_app(make_settings(f"sqlite:///{tmp_path / 'app.sqlite'}", policy_dir=str(policy)))
    assert str(policy) in str(raised.value)


@pytest.mark.parametrize("breakage", ["model_garbage", "policy_bad_arity", "policy_not_utf8", "policy_is_a_directory"])
def test_broken_policy_stops_the_commands(tmp_path, breakage):
    policy = shipped_policy(tmp_path)
    expected = BREAKAGES[breakage](policy)
    refused(tmp_path, sqlite_env(tmp_path, LOCKY_POLICY_DIR=str(policy)), expected, str(policy))


def test_missing_policy_directory_stops_startup(tmp_path):
    missing = tmp_path / "no-such-dir"
    with pytest.raises(SettingsError, match="cannot read policy file"):
        create_app(make_settings(f"sqlite:///{tmp_path / 'app.sqlite'}", policy_dir=str(missing)))
    refused(tmp_path, sqlite_env(tmp_path, LOCKY_POLICY_DIR=str(missing)), "cannot read policy file")


@pytest.mark.parametrize("url,secret", [("postgres://locky@127.0.0.1:5432/locky", None),
                                        ("postgresql://127.0.0.1/locky", ""),
                                        ("mysql://root@127.0.0.1:3306/locky", None)])
def test_missing_secret_with_a_server_database(tmp_path, url, secret):
    env = {"LOCKY_DATABASE_URL": url}
    if secret is not None:
        env["LOCKY_JWT_SECRET"] = secret
    if secret is None:
        with pytest.raises(SettingsError, match="LOCKY_JWT_SECRET is required"):
            create_app(make_settings(url, jwt_secret=None))
    refused(tmp_path, env, "LOCKY_JWT_SECRET")


@pytest.mark.parametrize("secret", ["short", "x" * 31, "\u00e9" * 15 + "x"])  # the last: 31 bytes in 16 characters
def test_short_secret(tmp_path, secret):
    with pytest.raises(SettingsError, match="at least 32 bytes"):
        create_app(make_settings(f"sqlite:///{tmp_path / 'app.sqlite'}", jwt_secret=secret))
    refused(tmp_path, sqlite_env(tmp_path, LOCKY_JWT_SECRET=secret), "LOCKY_JWT_SECRET", "32 bytes")
    assert secret not in run_locky(tmp_path, ["check"], sqlite_env(tmp_path, LOCKY_JWT_SECRET=secret))[2]


def test_short_stored_secret(tmp_path):
    """A secret file beside the SQLite database that someone shortened."""
    database = tmp_path / "locky.sqlite"
    (tmp_path / "locky.sqlite.secret").write_text("too-short\n")
    with pytest.raises(SettingsError, match="shorter than 32 bytes"):
        create_app(make_settings(f"sqlite:///{database}", jwt_secret=None))
    refused(tmp_path, {"LOCKY_DATABASE_URL": f"sqlite:///{database}"}, "shorter than 32 bytes")


def test_a_sound_configuration_passes_check(tmp_path):
    """The control: the same commands succeed once the settings are right."""
    env = sqlite_env(tmp_path, LOCKY_POLICY_DIR=str(shipped_policy(tmp_path)))
    code, out, err = run_locky(tmp_path, ["migrate"], env)  # check reads a database; migrate makes one
    assert code == 0, err
    code, out, err = run_locky(tmp_path, ["check"], env)
    assert code == 0, err
    assert "in order" in out
