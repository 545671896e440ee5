"""The built wheel (docs/http/authorization.md and docs/http/operation.md: ``pip install .`` then ``locky serve``
works with no other setup): ``python -m build --wheel`` on a copy of the source tree
yields a wheel holding the policy files, the local Swagger UI (every asset its
index.html refers to), the bundled plugin packages and the ``locky`` command; and
the unpacked wheel alone, not this checkout, answers ``locky check`` and ``locky spec``."""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import locky

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(
    ".git", "tests", "__pycache__", "*.pyc", "*.egg-info", "build", "dist", "tmp", ".pytest_cache",
    "*.sqlite", "*.sqlite.secret", ".venv", "venv", "node_modules",
)
REQUIRED = [
    "locky/policies/model.conf",
    "locky/policies/policy.csv",
    "locky/static/swagger/index.html",
    "locky/static/swagger/swagger-ui-bundle.js",
    "locky/static/swagger/swagger-ui.css",
    "locky/data/common-passwords.txt.gz",  # the password blocklist (locky.accounts.password_blocklist)
    "locky/data/COMMON-PASSWORDS-LICENSE",
]
PLUGIN_PACKAGES = ["locky_pony", "locky_jwt", "locky_bcrypt", "locky_casbin", "locky_mail"]


def _build_requirements_installed() -> bool:
    try:
        from importlib.metadata import version

        return int(version("setuptools").split(".")[0]) >= 77 and bool(version("wheel"))  # as pyproject.toml
    except Exception:
        return False


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Build once per module, from a copy so the shared checkout gets no build/ or egg-info."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "src"
    shutil.copytree(ROOT, source, ignore=SKIP)
    out = work / "dist"
    command = [sys.executable, "-m", "build", "--wheel", "--outdir", str(out)]
    if _build_requirements_installed():
        command.append("--no-isolation")  # quicker, and works offline
    done = subprocess.run(command, cwd=source, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    (built,) = out.glob("locky-*.whl")
    return built


@pytest.fixture(scope="module")
def names(wheel) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return set(archive.namelist())


@pytest.fixture(scope="module")
def unpacked(wheel, tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("site")
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    return target


def read(wheel: Path, name: str) -> str:
    with zipfile.ZipFile(wheel) as archive:
        return archive.read(name).decode()


def test_the_wheel_is_named_for_this_version_pure_python(wheel):
    assert wheel.name == f"locky-{locky.__version__}-py3-none-any.whl"


@pytest.mark.parametrize("path", REQUIRED)
def test_the_wheel_holds_the_policy_and_swagger_files(names, path):
    assert path in names


def test_the_policy_files_are_the_checkouts(wheel):
    for name in ("model.conf", "policy.csv"):
        assert read(wheel, f"locky/policies/{name}") == (ROOT / "policies" / name).read_text()


def test_every_asset_index_html_refers_to_is_in_the_wheel(wheel, names):
    html = read(wheel, "locky/static/swagger/index.html")
    assets = re.findall(r'(?:src|href)="\./([^"]+)"', html)
    assert "swagger-ui-bundle.js" in assets and "swagger-ui.css" in assets
    for asset in assets:
        assert f"locky/static/swagger/{asset}" in names, asset


def test_the_wheel_holds_the_console_and_every_file_it_loads(wheel, names):
    html = read(wheel, "locky/console/index.html")
    assets = re.findall(r'(?:src|href)="/console/([^"]+)"', html)
    assert "app.js" in assets and "console.css" in assets
    modules = {"app.js"}
    for module in sorted(modules):  # app.js imports every screen's module
        modules.update(re.findall(r'from "\./([a-z]+\.js)"', read(wheel, f"locky/console/{module}")))
    assert len(modules) > 5
    for name in set(assets) | modules:
        assert f"locky/console/{name}" in names, name


@pytest.mark.parametrize("package", PLUGIN_PACKAGES)
def test_the_wheel_holds_the_bundled_plugin_packages(names, package):
    assert f"{package}/__init__.py" in names


def test_the_wheel_holds_the_core_packages_and_no_tests(names):
    for module in ("locky/__init__.py", "locky/app.py", "locky/cli/main.py", "locky/resources/users.py",
                   "locky/testing/__init__.py"):
        assert module in names, module
    assert not any(name.startswith(("tests/", "plugins/", "policies/")) for name in names)
    # The project's own test infrastructure (tests/support) is not for plugin authors.
    for module in ("server", "pgbouncer", "replica_cluster"):
        assert f"locky/testing/{module}.py" not in names, module
        assert not any(name.endswith(f"support/{module}.py") for name in names), module
    assert not any(name.endswith((".pyc", ".sqlite", ".secret")) for name in names)


def test_the_wheel_declares_the_locky_command(wheel, names):
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    parser = configparser.ConfigParser()
    parser.read_string(read(wheel, entry_points))
    assert parser["console_scripts"]["locky"].strip() == "locky.cli.main:main"
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = read(wheel, metadata)
    assert "Name: locky" in text and f"Version: {locky.__version__}\n" in text


def _run_unpacked(unpacked: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LOCKY_")}
    env.update(PYTHONPATH=str(unpacked), LOCKY_DATABASE_URL=f"sqlite:///{cwd / 'wheel.sqlite'}", LOCKY_BCRYPT_ROUNDS="4")
    return subprocess.run([sys.executable, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def test_the_unpacked_wheel_runs_on_its_own_files(unpacked, tmp_path):
    where = _run_unpacked(unpacked, tmp_path, "-c",
                          "import locky, locky_pony, locky_casbin; print(locky.__file__); print(locky_casbin.__file__)")
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert Path(line).is_relative_to(unpacked), line  # not this checkout

    migrate = _run_unpacked(unpacked, tmp_path, "-m", "locky.cli.main", "migrate")
    assert migrate.returncode == 0, migrate.stderr
    check = _run_unpacked(unpacked, tmp_path, "-m", "locky.cli.main", "check")
    assert check.returncode == 0, check.stderr
    assert (tmp_path / "wheel.sqlite.secret").exists()

    spec = _run_unpacked(unpacked, tmp_path, "-m", "locky.cli.main", "spec")
    assert spec.returncode == 0, spec.stderr
    document = json.loads(spec.stdout)
    assert (document["info"]["title"], document["info"]["version"]) == ("Locky API", "1.0.0")


def test_the_wheel_carries_the_licence(wheel, names):
    """``project.license`` is the SPDX expression and LICENSE ships in the dist-info (PEP 639)."""
    licences = [n for n in names if re.fullmatch(rf"locky-{re.escape(locky.__version__)}\.dist-info/licenses/LICENSE", n)]
    assert licences, sorted(n for n in names if ".dist-info/" in n)
    assert read(wheel, licences[0]) == (ROOT / "LICENSE").read_text()
    (metadata,) = [n for n in names if n.endswith(".dist-info/METADATA")]
    text = read(wheel, metadata)
    assert "License-Expression: Apache-2.0" in text
    assert "License-File: LICENSE" in text


def test_the_wheel_holds_the_openid_providers_package_and_its_page_templates(names):
    templates = sorted(path.name for path in (ROOT / "locky" / "oauth" / "templates").glob("*.html"))
    assert {"base.html", "signin.html", "code.html", "consent.html"} <= set(templates)
    for name in templates:
        assert f"locky/oauth/templates/{name}" in names, name
    assert "locky/oauth/authorize.py" in names and "locky/oauth/server.py" in names
