"""``locky plugins`` lists what is loaded and from where, as an operator runs it."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path

import pytest

from locky.testing import TEST_SECRET

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def locky(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    environ.update({"LOCKY_DATABASE_URL": f"sqlite:///{tmp_path / 'locky.sqlite'}", "LOCKY_JWT_SECRET": TEST_SECRET})
    environ.update(env)
    return subprocess.run([sys.executable, "-m", "locky.cli.main", *args], cwd=tmp_path, env=environ,
                          capture_output=True, text=True, timeout=120)


def rows(output: str) -> dict[str, str]:
    """Plugin or slot name -> the rest of its line."""
    found = {}
    for line in output.splitlines():
        if line and not line.startswith(" "):
            name, _, rest = line.partition(" ")
            found[name] = rest.strip()
    return found


def test_lists_bundled_plugins_with_their_files_and_hooks(tmp_path):
    result = locky(tmp_path, "plugins")
    assert result.returncode == 0, result.stderr
    listed = rows(result.stdout)
    hooks = {line.split("hooks: ")[1] for line in result.stdout.splitlines() if "hooks: " in line}
    for name, hook in (("locky.resources.plugin", "locky_routes"), ("locky_pony", "locky_register_storage"),
                       ("locky_jwt", "locky_register_tokens"), ("locky_bcrypt", "locky_register_password_hashers"),
                       ("locky_casbin", "locky_register_authorizers")):
        assert listed[name].endswith(".py") and Path(listed[name]).is_file(), (name, listed[name])
        assert any(hook in line.split(", ") for line in hooks), hook
    # The Casbin plugin brings its own command and settings check.
    assert "locky_add_commands, locky_add_settings, locky_register_authorizers" in hooks
    assert listed["storage"].startswith("pony*") or ", pony*" in listed["storage"]
    assert listed["password_hasher"].startswith("bcrypt*")
    assert listed["tokens"].startswith("jwt*") and listed["authorizer"].startswith("casbin*")


@pytest.mark.extras
def test_lists_modules_from_locky_plugins(tmp_path):
    pytest.importorskip("argon2", reason="pip install 'locky[argon2]'")
    result = locky(tmp_path, "plugins", LOCKY_PLUGINS="locky_api_keys,locky_argon2",
                   PYTHONPATH=str(EXAMPLES / "api-keys"), LOCKY_PASSWORD_HASHER="argon2")
    assert result.returncode == 0, result.stderr
    listed = rows(result.stdout)
    assert listed["locky_api_keys"] == str(EXAMPLES / "api-keys" / "locky_api_keys.py")
    assert "hooks: locky_add_settings, locky_authenticate, locky_routes, locky_shutdown" in result.stdout
    assert listed["password_hasher"].startswith("argon2*, bcrypt")


@pytest.mark.extras
def test_lists_installed_distributions(tmp_path):
    try:
        version = importlib.metadata.version("locky-memory-storage")
    except importlib.metadata.PackageNotFoundError:
        if os.environ.get("CI"):
            pytest.fail("locky-memory-storage is not installed (.ci/run installs it)", pytrace=False)
        pytest.skip("pip install examples/locky-memory-storage")
    result = locky(tmp_path, "plugins", LOCKY_STORAGE="memory")
    assert result.returncode == 0, result.stderr
    listed = rows(result.stdout)
    assert listed["memory"] == f"locky-memory-storage {version}"
    assert listed["storage"].startswith("memory*, pony ")

    blocked = rows(locky(tmp_path, "plugins", LOCKY_BLOCK_PLUGINS="memory").stdout)
    assert "memory" not in blocked and blocked["storage"].startswith("pony*")


def test_an_unknown_or_blocked_provider_stops_with_the_known_names(tmp_path):
    result = locky(tmp_path, "plugins", LOCKY_BLOCK_PLUGINS="locky_bcrypt")
    assert result.returncode == 2
    assert "unknown password hasher provider 'bcrypt'; known: none" in result.stderr
    result = locky(tmp_path, "plugins", LOCKY_PLUGINS="no_such_plugin_module")
    assert result.returncode == 2 and "LOCKY_PLUGINS names 'no_such_plugin_module'" in result.stderr
