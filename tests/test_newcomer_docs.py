"""What a newcomer and a plugin author copy from the README and docs/plugins.md works as
written. The code blocks are taken from the pages themselves (not retyped here), so a
change to either side that breaks a reader fails here:

- the README's command lines (policy, operating, clients) parse with the real parsers;
- the README's login answer has the fields it lists, and the uuid look-ups it shows are
  open to any logged-in user;
- docs/plugins.md's "plugin in ten lines" counts failed logins; a misspelt hook stops
  startup with the message the page quotes;
- docs/plugins.md's HTTP Basic scheme, its Swagger definition, its middleware and its
  login-lock recipe behave as the page says.

Not repeated here: hooks, events, settings, the authorizer page and operating.md have
their own drift tests (tests/test_docs*.py, tests/test_kit_*.py)."""

from __future__ import annotations

import base64
import contextlib
import io
import ipaddress
import json
import re
import shlex
import types
from pathlib import Path

import pytest

from locky import SettingsError, create_app, hookimpl
from locky.cli.main import _parser as locky_parser
from locky.cli.clients.admin import build_parser as admin_parser
from locky.cli.clients.anonymous import build_parser as anonymous_parser
from locky.cli.clients.app import build_parser as app_parser
from locky.testing import PASSWORD, LockyClient

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PLUGINS = (ROOT / "docs" / "plugins.md").read_text()
EVENTS = (ROOT / "docs" / "events.md").read_text()
FENCE = re.compile(r"^ *```(\w*)\n(.*?)^ *```", re.MULTILINE | re.DOTALL)
PROGRAMS = {"locky": locky_parser, "locky-admin": admin_parser, "locky-app": app_parser,
            "locky-anonymous": anonymous_parser}
SHELL_OPERATORS = {"|", "||", "&&", ";", ">", ">>", "<", "<<", "&", "2>&1"}


def section(page: str, heading: str) -> str:
    """The text of ``heading``'s section, up to the next heading of any level."""
    start = page.index(heading + "\n")
    following = re.search(r"^#{1,6} ", page[start + len(heading):], re.MULTILINE)
    return page[start:start + len(heading) + following.start()] if following else page[start:]


def python_blocks(text: str) -> list[str]:
    return [body for lang, body in FENCE.findall(text) if lang == "python"]


def module(name: str, *sources: str) -> types.ModuleType:
    """A plugin module made of the documented code, as a reader would save it."""
    plugin = types.ModuleType(name)
    for source in sources:
        exec(compile(source, f"<{name}>", "exec"), plugin.__dict__)
    return plugin


def readme_commands() -> list[list[str]]:
    """Every command line of the README's sh/console blocks run by one of Locky's programs."""
    found = []
    for lang, body in FENCE.findall(README):
        if lang not in ("sh", "console"):
            continue
        for line in body.splitlines():
            if lang == "console" and not line.startswith("$ "):
                continue  # the output of the command above
            try:
                words = shlex.split(line.removeprefix("$ "), comments=True)
            except ValueError:
                continue
            while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):
                words = words[1:]
            if words and words[0] in PROGRAMS:
                args = []
                for arg in words[1:]:
                    if arg in SHELL_OPERATORS or re.match(r"\d?>", arg):  # also >/dev/null
                        break
                    args.append(arg)
                found.append([words[0], *args])
    return found


COMMANDS = readme_commands()


def test_the_readme_shows_commands_of_every_program():
    assert {c[0] for c in COMMANDS} == set(PROGRAMS), COMMANDS
    assert len(COMMANDS) >= 20


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_every_readme_command_parses(command):
    program, *args = command
    args = [a.replace("$GROUP", "8ebe9e3c-ecdc-4573-8db3-ffac55ee3b35")
             .replace("$BOB", "bb93abdb-5c3e-4045-9ded-64b5d8c60f36") for a in args]
    error = io.StringIO()
    with contextlib.redirect_stderr(error), contextlib.redirect_stdout(io.StringIO()):
        try:
            PROGRAMS[program]().parse_args(args)
        except SystemExit as exit:
            pytest.fail(f"`{' '.join(command)}` does not parse (exit {exit.code}): {error.getvalue()}")


def test_the_login_answers_the_fields_the_readme_lists(locky_client):
    locky_client.register("ada@example.com", name="Ada")
    answer = locky_client.login("ada@example.com")
    listed = re.search(r"Login answers `\{([^}]*)\}`", README).group(1)
    assert set(answer) == set(re.findall(r'(?<!: )"(\w+)"', listed))  # keys, not values
    assert answer["token_type"] == "Bearer" and answer["expires_in"] == 900
    assert answer["user"]["email"] == "ada@example.com"


def test_a_uuid_is_found_by_email_and_by_name_by_any_logged_in_user(locky_client, locky_user):
    ada = locky_client.account("ada@example.com")
    group = locky_client.simulate_post("/v1/private/groups", json={"name": "editors"}, headers=ada.headers)
    assert group.status_code == 201
    users = locky_client.simulate_get("/v1/internal/users", params={"email": "ada@example.com"},
                                      headers=locky_user.headers)
    groups = locky_client.simulate_get("/v1/internal/groups", params={"name": "editors"},
                                       headers=locky_user.headers)
    assert [u["uuid"] for u in users.json["users"]] == [ada.uuid]
    assert [g["uuid"] for g in groups.json["groups"]] == [group.json["uuid"]]


def test_the_plugin_in_ten_lines_counts_failed_logins(locky_app_factory):
    [source] = python_blocks(section(PLUGINS, "## A plugin in ten lines"))
    app = locky_app_factory(plugin_objects=[module("locky_failed_logins", source)])
    client = LockyClient(app)
    client.register("ada@example.com")
    for _ in range(2):
        wrong = client.simulate_post("/v1/public/users/login",
                                     json={"email": "ada@example.com", "password": "not the password"})
        assert wrong.status_code == 401
    assert app.context.state["failed_logins"]["ada@example.com"] == 2


def test_a_misspelt_hook_stops_startup_with_the_documented_message(locky_settings):
    quoted = re.search(r"Locky refuses to start \(`([^`]+)`\)", PLUGINS).group(1)

    class Misspelt:
        @hookimpl
        def locky_evnet(self, event):
            pass

    with pytest.raises(SettingsError, match=re.escape(quoted)):
        create_app(locky_settings, plugins=[Misspelt()], background=False)


# The authentication-scheme section: the scheme, the middleware and the lock recipe.
SCHEME, MIDDLEWARE, LOCK_RECIPE = python_blocks(section(PLUGINS, "## Authentication schemes"))
ME = "/v1/internal/users/me"


def basic(email: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{email}:{password}".encode()).decode()}


@pytest.fixture
def basic_client(locky_app_factory):
    plugin = module("locky_basic", SCHEME, MIDDLEWARE)
    client = LockyClient(locky_app_factory(plugin_objects=[plugin]))
    client.register("ada@example.com")
    return client


def test_the_documented_basic_scheme_lets_the_right_password_in(basic_client):
    me = basic_client.simulate_get(ME, headers=basic("ada@example.com", PASSWORD))
    assert me.status_code == 200 and me.json["email"] == "ada@example.com"


def test_a_bad_basic_credential_gets_the_documented_401(basic_client):
    shown = re.search(r"```http\n(.*?)```", section(PLUGINS, "## Authentication schemes"), re.DOTALL).group(1)
    challenge = re.search(r"^WWW-Authenticate: (.*)$", shown, re.MULTILINE).group(1)
    body = re.search(r"^\{.*\}$", shown, re.MULTILINE).group(0)
    answer = basic_client.simulate_get(ME, headers=basic("ada@example.com", "wrong"))
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == challenge
    assert answer.json == json.loads(body)


def test_no_credential_is_offered_both_schemes_by_the_documented_middleware(basic_client):
    answer = basic_client.simulate_get(ME)
    assert answer.status_code == 401
    assert answer.headers["WWW-Authenticate"] == 'Bearer, Basic realm="locky"'


def test_the_documented_swagger_definition_is_listed_by_protected_operations(basic_client):
    spec = basic_client.simulate_get("/swagger/doc.json").json
    assert spec["securityDefinitions"]["Basic"]["type"] == "basic"
    assert spec["paths"]["/internal/users/me"]["get"]["security"] == [{"Bearer": []}, {"Basic": []}]
    assert "security" not in spec["paths"]["/public/users/login"]["post"]


def test_the_lock_recipe_locks_basic_logins_and_locky_unlock_ends_it(locky_app_factory):
    recipe = module("locky_basic_locked", SCHEME, LOCK_RECIPE)

    class Locking:
        @hookimpl
        def locky_authenticate(self, req, context):
            scheme, _, credential = (req.get_header("Authorization") or "").partition(" ")
            if scheme.lower() != "basic":
                return None
            email, _, password = base64.b64decode(credential).decode().partition(":")
            return recipe.check_password(context, email, password)

    app = locky_app_factory(plugin_objects=[Locking()])
    client = LockyClient(app)
    client.register("ada@example.com")
    limit = app.context.settings.login_max_failures
    statuses = [client.simulate_get(ME, headers=basic("ada@example.com", "wrong")).status_code
                for _ in range(limit + 1)]
    assert statuses == [401] * limit + [429]
    locked = client.simulate_get(ME, headers=basic("ada@example.com", PASSWORD))
    assert locked.status_code == 429 and int(locked.headers["Retry-After"]) >= 1
    assert app.context.storage.throttle.reset("ada@example.com")  # what `locky unlock` does
    assert client.simulate_get(ME, headers=basic("ada@example.com", PASSWORD)).status_code == 200


def test_an_event_record_holds_no_password_hash_as_the_event_table_says(locky_app_factory):
    assert "Never a password, password hash" in EVENTS
    records = []

    class Recorder:
        @hookimpl
        def locky_event(self, event):
            if event.record is not None:
                records.append(event.record)

    LockyClient(locky_app_factory(plugin_objects=[Recorder()])).register("ada@example.com")
    assert records
    assert all(not getattr(record, "password_hash", "") for record in records)


# -- example addresses ------------------------------------------------------------------

PRIVATE_NETWORKS = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16")]


def test_the_docs_name_reserved_example_hosts_never_a_private_address():
    """Examples name example.com hosts (RFC 2606) or loopback, never an address of
    somebody's private network that a reader might copy into a webhook or a proxy list."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "examples").rglob("*.md"))]
    found = []
    for page in pages:
        for match in re.finditer(r"(?<![\w.])(\d{1,3}(?:\.\d{1,3}){3})(?![\w.]*\d)", page.read_text()):
            try:
                address = ipaddress.ip_address(match.group(1))
            except ValueError:
                continue
            if any(address in network for network in PRIVATE_NETWORKS):
                found.append(f"{page.relative_to(ROOT)}: {match.group(1)}")
    assert not found, found
    assert "hooks.example.com" in (ROOT / "docs" / "clients.md").read_text()


def test_locky_policy_test_runs_the_shipped_cases_without_a_file(capsys, tmp_path):
    """The README's `locky policy test --policy DIR`: the cases shipped in the package,
    which pyproject.toml's package data puts in the wheel beside the shipped policy."""
    import tomllib

    from locky.cli.main import main
    from locky_casbin.commands import shipped_cases

    assert shipped_cases().is_file() and shipped_cases().name == "cases.csv"
    assert "locky policy test --policy ./my-policy" in README
    assert main(["policy", "test"]) == 0
    assert re.search(r"\b(\d{2,}) passed, 0 failed", capsys.readouterr().out)
    own = tmp_path / "policy"
    own.mkdir()
    for name in ("model.conf", "policy.csv"):
        (own / name).write_text((ROOT / "policies" / name).read_text())
    (own / "policy.csv").write_text((own / "policy.csv").read_text().replace("p, owner,", "p, ownerx,"))
    assert main(["policy", "test", "--policy", str(own)]) == 1  # a shipped case now fails
    assert "FAIL" in capsys.readouterr().out
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert setuptools["package-dir"]["locky.policies"] == "policies"
    assert "*.csv" in setuptools["package-data"]["locky.policies"] and "locky.policies" in setuptools["packages"]


def test_the_readme_client_transcript_shows_the_prompts_and_the_whole_records():
    """The README's client transcript as the commands print it (run against a server to
    write it): each register prompts twice and notes the login command, each password
    login prompts once, and a record shown lists every field of its schema."""
    from locky import schemas

    text = section(README, "## Command-line clients")
    (transcript,) = [body for lang, body in FENCE.findall(text) if lang == "console"]
    lines = transcript.splitlines()
    for number, line in enumerate(lines):
        if line.startswith("$ ") and " register --name " in line:
            email = re.search(r"--email (\S+)", line).group(1)
            name = re.search(r"--name (\S+)", line).group(1)
            assert lines[number + 1:number + 4] == [
                "Password:", "Repeat password:",
                f"Registered {name} <{email}>. Log in with: locky-anonymous login --email {email}"], line
        elif re.match(r"\$ locky-\S+ login --email \S+", line) and "--password-stdin" not in line:
            assert lines[number + 1] == "Password:", line
            assert lines[number + 2].startswith("Logged in to http://127.0.0.1:8080 as "), line

    def shown_after(command: str) -> set[str]:
        start = next(n for n, line in enumerate(lines) if line.startswith("$ " + command))
        names = set()
        for line in lines[start + 1:]:
            if line.startswith("$ "):
                break
            names.add(line.split()[0])
        return names

    assert {f for f in schemas.UserSchema().fields} <= shown_after("locky-anonymous register --name Ada")
    assert {f for f in schemas.GroupSchema().fields} <= shown_after("locky-app groups create")
    assert {f for f in schemas.RoleSchema().fields} <= shown_after("locky-admin roles create")
