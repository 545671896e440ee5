"""``locky-app`` / ``locky-admin`` ``authz explain``, ``batch``, ``permissions`` and
``subjects`` (docs/http/authorization.md) against a real Locky server over a real socket, the way
``tests/test_clients.py`` runs the clients."""

from __future__ import annotations

import json
import uuid

import pytest

from locky.cli.clients import admin, app
from locky.cli.clients.http import HttpClient
from locky.testing import ADMIN_EMAIL

from clients_fixtures import alice, cli, home, locky_settings, mailbox, root, server, token_file  # noqa: F401

NEW_COMMANDS = ("explain", "batch", "permissions", "subjects")


@pytest.fixture
def team(cli, alice):
    """Alice (logged in with locky-app and locky-admin, no admin) owns group ops; Bob
    maintains it, Carol is a plain member."""
    bob = cli.register("Bob", "bob@example.com")
    carol = cli.register("Carol", "carol@example.com")
    group = cli.ok("app", "groups", "create", "--json", "--name", "ops").json()
    for user, role in ((bob, "maintainer"), (carol, "member")):
        cli.ok("app", "members", "add", "--group-uuid", group["uuid"], "--user-uuid", user["uuid"], "--role", role)
    cli.login("admin", "alice@example.com")  # every user may ask, with either client
    return {"alice": alice, "bob": bob, "carol": carol, "group": group["uuid"]}


def rows(text):
    return [line.split() for line in text.splitlines()]


def check(cli, user_uuid, resource, action, group_uuid=None):
    """The single check's answer, to compare every other answer with."""
    argv = ["authz", "check", "--json", "--user-uuid", user_uuid, "--resource", resource, "--action", action]
    return cli.ok("app", *argv, *(["--group-uuid", group_uuid] if group_uuid else [])).json()["allowed"]


# --- the command tree ------------------------------------------------------------------

@pytest.mark.parametrize("module", [app, admin], ids=["app", "admin"])
def test_both_clients_have_the_commands(module, home, capsys):
    for name in NEW_COMMANDS:
        assert module.main(["authz", name, "--help"]) == 0
        out = capsys.readouterr().out
        assert out.startswith(f"usage: {module.PROG} authz {name}") and "--json" in out and "--url" in out
    assert module.main(["authz", "--help"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[0] for line in out.split("\ncommands:\n")[1].splitlines()[1:] if line.startswith("    ") and not line.startswith("     ")]
    assert listed == ["check", *NEW_COMMANDS], out


@pytest.mark.parametrize("argv, message", [
    (["authz", "explain", "--user-uuid", "U", "--resource", "groups"], "the following arguments are required: --action"),
    (["authz", "batch"], "the following arguments are required: FILE"),
    (["authz", "permissions"], "the following arguments are required: --user-uuid"),
    (["authz", "permissions", "--user-uuid", "U", "--resource", "x"], "unrecognized arguments: --resource x"),
    (["authz", "subjects", "--resource", "groups"], "the following arguments are required: --action"),
    (["authz", "subjects", "--resource", "groups", "--action", "read", "--limit", "many"],
     "argument --limit: invalid int value: 'many'"),
    (["authz", "subjects", "--resource", "groups", "--action", "read", "--after-id", "x"],
     "argument --after-id: invalid int value: 'x'"),
])
def test_bad_arguments_exit_2(argv, message, home, capsys):
    for module in (app, admin):
        assert module.main(argv) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"usage: {module.PROG} ") and message in err, err


# --- explain ---------------------------------------------------------------------------

def test_explain_allowed_table_and_json(cli, team):
    bob, group = team["bob"]["uuid"], team["group"]
    argv = ["authz", "explain", "--user-uuid", bob, "--resource", "groups", "--action", "update", "--group-uuid", group]
    body = cli.ok("app", *argv, "--json").json()
    assert body["allowed"] is True
    assert body["roles"] == [{"role": "user", "scope": "global", "group_uuid": None},
                             {"role": "maintainer", "scope": "group", "group_uuid": group}]
    [matched] = body["matched"]
    assert (matched["role"], matched["scope"], matched["group_uuid"]) == ("maintainer", "group", group)
    assert matched["rule"].startswith("p, maintainer, ") and matched["rule"].endswith(", groups, update")

    out = cli.ok("app", *argv).out
    assert out == (
        "allowed\n"
        "\n"
        "roles held:\n"
        "ROLE        SCOPE   GROUP_UUID\n"
        "user        global  -\n"
        f"maintainer  group   {group}\n"
        "\n"
        "matched rules:\n"
        f"ROLE        SCOPE  GROUP_UUID{' ' * 28}RULE\n"
        f"maintainer  group  {group}  {matched['rule']}\n"
    )
    assert cli("app", *argv, "--exit-status").code == 0
    assert check(cli, bob, "groups", "update", group) is True


def test_explain_denied_and_unknown_user(cli, team):
    carol, group = team["carol"]["uuid"], team["group"]
    argv = ["authz", "explain", "--user-uuid", carol, "--resource", "groups", "--action", "update", "--group-uuid", group]
    body = cli.ok("app", *argv, "--json").json()
    assert body == {"allowed": False, "matched": [],
                    "roles": [{"role": "user", "scope": "global", "group_uuid": None},
                              {"role": "member", "scope": "group", "group_uuid": group}]}
    out = cli.ok("app", *argv).out
    assert out.startswith("denied\n\nroles held:\nROLE    SCOPE   GROUP_UUID\n")
    assert f"member  group   {group}\n" in out
    assert out.endswith("\n\nmatched rules: none\n")
    assert cli("app", *argv, "--exit-status").code == 3
    assert check(cli, carol, "groups", "update", group) is False

    # without the group, the membership role is not held
    body = cli.ok("app", *argv[:-2], "--json").json()
    assert body["roles"] == [{"role": "user", "scope": "global", "group_uuid": None}] and not body["allowed"]

    nobody = ["authz", "explain", "--user-uuid", str(uuid.uuid4()), "--resource", "users", "--action", "read"]
    assert cli.ok("app", *nobody, "--json").json() == {"allowed": False, "matched": [], "roles": []}
    assert cli.ok("app", *nobody).out == "denied\n\nroles held: none\n\nmatched rules: none\n"


def test_explain_for_an_admin_with_locky_admin(cli, root, alice):
    argv = ["authz", "explain", "--user-uuid", root["uuid"], "--resource", "invoices", "--action", "approve"]
    body = cli.ok("admin", *argv, "--json").json()
    assert body == {"allowed": True,
                    "matched": [{"role": "admin", "scope": "global", "group_uuid": None, "rule": "p, admin, *, *, *"}],
                    "roles": [{"role": "user", "scope": "global", "group_uuid": None},
                              {"role": "admin", "scope": "global", "group_uuid": None}]}
    out = cli.ok("admin", *argv).out
    assert rows(out)[-2:] == [["ROLE", "SCOPE", "GROUP_UUID", "RULE"], ["admin", "global", "-", "p,", "admin,", "*,", "*,", "*"]]
    # and a plain user asks the same question with locky-app
    assert cli.ok("app", *argv, "--json").json() == body


# --- batch -----------------------------------------------------------------------------

def team_checks(team):
    """Questions with known answers: (check, allowed)."""
    alice, bob, carol, group = team["alice"]["uuid"], team["bob"]["uuid"], team["carol"]["uuid"], team["group"]
    return [
        ({"user_uuid": alice, "resource": "groups", "action": "delete", "group_uuid": group}, True),
        ({"user_uuid": bob, "resource": "groups", "action": "update", "group_uuid": group}, True),
        ({"user_uuid": bob, "resource": "groups", "action": "delete", "group_uuid": group}, False),
        ({"user_uuid": carol, "resource": "users", "action": "read"}, True),
        ({"user_uuid": carol, "resource": "roles", "action": "write"}, False),
    ]


def expected_lines(team):
    return [["allowed" if allowed else "denied", c["user_uuid"], c["resource"], c["action"], c.get("group_uuid", "-")]
            for c, allowed in team_checks(team)]


def expected_json(team):
    return {"results": [{"group_uuid": None, **c, "allowed": allowed} for c, allowed in team_checks(team)]}


def csv_text(team):
    lines = ["user_uuid,resource,action,group_uuid", "# a comment, skipped", ""]
    for c, _ in team_checks(team):
        lines.append(",".join([c["user_uuid"], c["resource"], c["action"]] + ([c["group_uuid"]] if "group_uuid" in c else [])))
    return "\n".join(lines) + "\n"


def test_batch_csv_from_a_file_and_from_stdin(cli, team, tmp_path):
    for c, allowed in team_checks(team):  # each answer equals the single check's
        assert check(cli, c["user_uuid"], c["resource"], c["action"], c.get("group_uuid")) is allowed
    path = tmp_path / "checks.csv"
    path.write_text(csv_text(team))
    result = cli.ok("app", "authz", "batch", str(path))
    assert rows(result.out) == expected_lines(team)
    first = result.out.splitlines()[0]
    assert first == f"allowed  {team['alice']['uuid']}  groups  delete  {team['group']}"
    assert result.out.splitlines()[3] == f"allowed  {team['carol']['uuid']}  users   read    -"
    assert cli.ok("app", "authz", "batch", str(path), "--json").json() == expected_json(team)

    result = cli.ok("app", "authz", "batch", "-", stdin=csv_text(team))
    assert rows(result.out) == expected_lines(team)
    assert cli.ok("admin", "authz", "batch", "--json", "-", stdin=csv_text(team)).json() == expected_json(team)
    # a trailing empty group column is no group
    line = f"{team['carol']['uuid']},users,read,\n"
    assert cli.ok("app", "authz", "batch", "-", "--json", stdin=line).json() == {"results": [
        {"user_uuid": team["carol"]["uuid"], "resource": "users", "action": "read", "group_uuid": None,
         "allowed": True}]}


def test_batch_json_forms(cli, team, tmp_path):
    checks = [c for c, _ in team_checks(team)]
    forms = {
        "list.json": json.dumps(checks, indent=2),
        "object.json": json.dumps({"checks": checks}),
        "lines.jsonl": "\n".join(json.dumps(c) for c in checks) + "\n",
    }
    for name, text in forms.items():
        path = tmp_path / name
        path.write_text(text)
        assert rows(cli.ok("app", "authz", "batch", str(path)).out) == expected_lines(team), name
        assert cli.ok("app", "authz", "batch", "--json", str(path)).json() == expected_json(team), name
        assert cli.ok("app", "authz", "batch", "-", "--json", stdin=text).json() == expected_json(team), name


def test_batch_exit_status(cli, team):
    assert cli("app", "authz", "batch", "-", "--exit-status", stdin=csv_text(team)).code == 3
    allowed_only = [c for c, allowed in team_checks(team) if allowed]
    result = cli("app", "authz", "batch", "-", "--exit-status", stdin=json.dumps(allowed_only))
    assert result.code == 0 and set(line.split()[0] for line in result.out.splitlines()) == {"allowed"}
    assert cli("app", "authz", "batch", "-", stdin=csv_text(team)).code == 0  # without --exit-status


@pytest.fixture
def posted(monkeypatch):
    """The number of checks in every POST /v1/internal/authz/check the clients send."""
    sizes = []
    original = HttpClient.request

    def request(self, method, path, body=None, query=None, token=None):
        if method == "POST" and path == "/v1/internal/authz/check":
            sizes.append(len(body["checks"]))
        return original(self, method, path, body, query, token)

    monkeypatch.setattr(HttpClient, "request", request)
    return sizes


def test_batch_over_100_checks_goes_in_chunks(cli, team, posted):
    bob, carol, group = team["bob"]["uuid"], team["carol"]["uuid"], team["group"]
    # Alternately allowed (Bob updates the group) and denied (Carol does not).
    checks = [{"user_uuid": bob if i % 2 == 0 else carol, "resource": "groups", "action": "update",
               "group_uuid": group} for i in range(250)]
    result = cli.ok("app", "authz", "batch", "-", stdin=json.dumps({"checks": checks}))
    assert posted == [100, 100, 50]
    lines = rows(result.out)
    assert len(lines) == 250
    assert [line[:2] for line in lines] == [["allowed", bob] if i % 2 == 0 else ["denied", carol] for i in range(250)]

    posted.clear()
    csv_lines = "".join(f"{carol},users,read\n" for _ in range(101))
    body = cli.ok("admin", "authz", "batch", "-", "--json", stdin=csv_lines).json()
    assert posted == [100, 1]
    assert body["results"] == [{"user_uuid": carol, "resource": "users", "action": "read", "group_uuid": None,
                                "allowed": True}] * 101

    posted.clear()
    exactly = "".join(f"{carol},users,read\n" for _ in range(100))
    assert len(rows(cli.ok("app", "authz", "batch", "-", stdin=exactly).out)) == 100
    assert posted == [100]


def test_batch_server_errors_name_the_check(cli, team, posted):
    carol = team["carol"]["uuid"]
    good = {"user_uuid": carol, "resource": "users", "action": "read"}
    checks = [good] * 150 + [{**good, "user_uuid": "not-a-uuid"}] + [good] * 10
    result = cli("app", "authz", "batch", "-", stdin=json.dumps(checks))
    # counted over the whole input, though it was the 51st item of the second chunk
    assert (result.code, result.out) == (1, "")
    assert result.err == "error: 400: checks.150.user_uuid: Not a valid UUID.\n"
    assert posted == [100, 61]

    result = cli("app", "authz", "batch", "-", stdin=f"{carol},users,read\n{carol},Bad Resource!,read\n")
    assert result.code == 1 and result.err.startswith("error: 400: checks.1.resource: ")
    result = cli("app", "authz", "batch", "-", stdin=json.dumps([{**good, "colour": "red"}]))
    assert (result.code, result.err) == (1, "error: 400: checks.0.colour: Unknown field.\n")
    result = cli("app", "authz", "batch", "-", stdin=json.dumps([{"user_uuid": carol, "resource": "users"}]))
    assert result.code == 1 and result.err.startswith("error: 400: checks.0.action: ")


@pytest.mark.parametrize("stdin, message", [
    ("", "no checks in standard input"),
    ("# only a comment\n\n", "no checks in standard input"),
    ("user_uuid,resource,action\n", "no checks in standard input"),
    ("[]", "no checks in standard input"),
    ('{"checks": []}', "no checks in standard input"),
    ("a,b\n", "standard input, line 1: expected user_uuid,resource,action[,group_uuid], got 2 fields"),
    ("a,b,c\n\na,b,c,d,e\n", "standard input, line 3: expected user_uuid,resource,action[,group_uuid], got 5 fields"),
    ("[{", "standard input: not valid JSON"),
    ('{"a": 1}\n{oops\n', "standard input, line 2: not valid JSON"),
    ('"checks"', "standard input, line 1: expected user_uuid,resource,action[,group_uuid], got 1 field"),
    ("[1, 2]", "standard input: check 0 is not an object"),
    ('{"checks": {"user_uuid": "x"}}', 'standard input: expected a list of checks or {"checks": [...]}'),
    ('{"checks": [], "more": 1}', 'standard input: expected only "checks" in the object, got more'),
])
def test_batch_bad_input_exits_2(cli, alice, stdin, message, posted):
    result = cli("app", "authz", "batch", "-", stdin=stdin)
    assert result.code == 2 and result.out == ""
    assert result.err.startswith("locky-app: error: ") and message in result.err, result.err
    assert posted == []  # nothing was sent


def test_batch_unreadable_file_exits_2(cli, alice, tmp_path):
    missing = tmp_path / "missing.csv"
    result = cli("app", "authz", "batch", str(missing))
    assert (result.code, result.err) == (2, f"locky-app: error: cannot read {missing}: No such file or directory\n")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    result = cli("app", "authz", "batch", str(binary))
    assert (result.code, result.err) == (2, f"locky-app: error: cannot read {binary}: not UTF-8 text\n")


# --- permissions -----------------------------------------------------------------------

def test_permissions_table_and_json(cli, team):
    bob, group = team["bob"]["uuid"], team["group"]
    body = cli.ok("app", "authz", "permissions", "--user-uuid", bob, "--json").json()
    permissions = body["permissions"]
    assert set(body) == {"permissions"}
    assert {"resource": "groups", "action": "update", "scope": "group", "group_uuid": group,
            "via": "maintainer"} in permissions
    assert {"resource": "users", "action": "read", "scope": "global", "group_uuid": None, "via": "user"} in permissions
    assert not any(p["resource"] == "groups" and p["action"] == "delete" for p in permissions)

    lines = rows(cli.ok("app", "authz", "permissions", "--user-uuid", bob).out)
    assert lines[0] == ["RESOURCE", "ACTION", "SCOPE", "GROUP_UUID", "VIA"]
    assert lines[1:] == [[p["resource"], p["action"], p["scope"], p["group_uuid"] or "-", p["via"]]
                         for p in permissions]
    assert ["groups", "update", "group", group, "maintainer"] in lines

    # only what holds in one group: not the maintainer's rights in ops elsewhere
    other = cli.ok("app", "groups", "create", "--json", "--name", "elsewhere").json()["uuid"]
    there = cli.ok("app", "authz", "permissions", "--user-uuid", bob, "--group-uuid", other, "--json").json()
    assert there["permissions"] and all(p["via"] != "maintainer" for p in there["permissions"])
    here = cli.ok("app", "authz", "permissions", "--user-uuid", bob, "--group-uuid", group, "--json").json()
    assert {"resource": "groups", "action": "update", "scope": "group", "group_uuid": group,
            "via": "maintainer"} in here["permissions"]

    # an unknown user may do nothing: a table of its header only
    nobody = str(uuid.uuid4())
    assert cli.ok("app", "authz", "permissions", "--user-uuid", nobody, "--json").json() == {"permissions": []}
    assert cli.ok("app", "authz", "permissions", "--user-uuid", nobody).out == "RESOURCE  ACTION  SCOPE  GROUP_UUID  VIA\n"


def test_permissions_of_an_admin(cli, root):
    body = cli.ok("admin", "authz", "permissions", "--user-uuid", root["uuid"], "--json").json()
    assert {"resource": "*", "action": "*", "scope": "global", "group_uuid": None, "via": "admin"} in body["permissions"]
    assert ["*", "*", "global", "-", "admin"] in rows(cli.ok("admin", "authz", "permissions", "--user-uuid",
                                                             root["uuid"]).out)


# --- subjects --------------------------------------------------------------------------

def test_subjects_table_json_and_all_users(cli, team):
    group = team["group"]
    argv = ["authz", "subjects", "--resource", "groups", "--action", "update", "--group-uuid", group]
    body = cli.ok("app", *argv, "--json").json()
    assert body == {"users": [team["alice"], team["bob"]], "next_after_id": None, "all_users": False}
    result = cli.ok("app", *argv)
    lines = rows(result.out)
    assert lines[0] == ["ID", "UUID", "NAME", "EMAIL", "CREATED_AT"]
    assert [line[3] for line in lines[1:]] == ["alice@example.com", "bob@example.com"]
    assert "every authenticated user" not in result.out and result.err == ""
    for user in (team["alice"], team["bob"], team["carol"]):
        assert check(cli, user["uuid"], "groups", "update", group) is (user is not team["carol"])

    # without the group, nobody holds groups:update
    assert cli.ok("app", *argv[:-2], "--json").json() == {"users": [], "next_after_id": None, "all_users": False}

    # every user may read users: said in a line, and no one is listed one by one
    argv = ["authz", "subjects", "--resource", "users", "--action", "read"]
    assert cli.ok("app", *argv, "--json").json() == {"users": [], "next_after_id": None, "all_users": True}
    assert cli.ok("app", *argv).out == (
        "ID  UUID  NAME  EMAIL  CREATED_AT\n"
        "every authenticated user may read users (all_users); the users listed hold an explicit grant\n")


def test_subjects_with_admin_and_all_users(cli, root, alice):
    body = cli.ok("admin", "authz", "subjects", "--json", "--resource", "users", "--action", "read").json()
    assert body["all_users"] is True and [u["email"] for u in body["users"]] == [ADMIN_EMAIL]
    out = cli.ok("admin", "authz", "subjects", "--resource", "users", "--action", "read").out.splitlines()
    assert out[1].split()[3] == ADMIN_EMAIL
    assert out[2] == "every authenticated user may read users (all_users); the users listed hold an explicit grant"
    # an application's own resource: only the admin may, and a plain user can ask too
    body = cli.ok("app", "authz", "subjects", "--json", "--resource", "invoices", "--action", "approve").json()
    assert ([u["uuid"] for u in body["users"]], body["next_after_id"], body["all_users"]) == ([root["uuid"]], None, False)
    out = cli.ok("app", "authz", "subjects", "--resource", "invoices", "--action", "approve").out
    assert [line[3] for line in rows(out)[1:]] == [ADMIN_EMAIL] and "every authenticated user" not in out


def test_subjects_paging(cli, team):
    group = team["group"]
    extra = [cli.register(f"User{i}", f"user{i}@example.com") for i in range(4)]
    for user in extra:
        cli.ok("app", "members", "add", "--group-uuid", group, "--user-uuid", user["uuid"], "--role", "maintainer")
    holders = [team["alice"], team["bob"], *extra]
    argv = ["authz", "subjects", "--resource", "members", "--action", "create", "--group-uuid", group]

    first = cli.ok("app", *argv, "--json", "--limit", "2").json()
    assert first == {"users": holders[:2], "next_after_id": team["bob"]["id"], "all_users": False}
    result = cli.ok("app", *argv, "--limit", "2")
    assert [line[3] for line in rows(result.out)[1:]] == ["alice@example.com", "bob@example.com"]
    assert result.err == f"(more: add --after-id {team['bob']['id']}, or --all)\n"
    second = cli.ok("app", *argv, "--json", "--limit", "2", "--after-id", str(first["next_after_id"])).json()
    assert second["users"] == holders[2:4]

    merged = cli.ok("app", *argv, "--json", "--all", "--limit", "2").json()
    assert merged == {"users": holders, "next_after_id": None, "all_users": False}
    tail = cli.ok("app", *argv, "--json", "--all", "--after-id", str(extra[1]["id"])).json()
    assert tail["users"] == extra[2:]
    result = cli.ok("app", *argv, "--all", "--limit", "2")
    assert [line[3] for line in rows(result.out)[1:]] == [u["email"] for u in holders] and result.err == ""
    assert cli.ok("admin", *argv, "--all", "--json", "--limit", "3").json()["users"] == holders


# --- errors from the server -------------------------------------------------------------

@pytest.mark.parametrize("argv, start", [
    (["explain", "--user-uuid", "nope", "--resource", "users", "--action", "read"], "user_uuid: Not a valid UUID."),
    (["explain", "--user-uuid", str(uuid.UUID(int=1)), "--resource", "Users!", "--action", "read"],
     "resource: Not a valid resource."),
    (["explain", "--user-uuid", str(uuid.uuid4()), "--resource", "users", "--action", "read",
      "--group-uuid", "g"], "group_uuid: Not a valid UUID."),
    (["permissions", "--user-uuid", "nope"], "user_uuid: Not a valid UUID."),
    (["permissions", "--user-uuid", str(uuid.uuid4()), "--group-uuid", "nope"], "group_uuid: Not a valid UUID."),
    (["subjects", "--resource", "users", "--action", "Read Me"], "action: Not a valid action."),
    (["subjects", "--resource", "users", "--action", "read", "--limit", "0"], "limit: "),
    (["subjects", "--resource", "users", "--action", "read", "--limit", "501"], "limit: "),
])
def test_server_errors_are_one_line(cli, alice, argv, start):
    for audience in ("app", "admin"):
        if audience == "admin":
            cli.login("admin", "alice@example.com")  # any user may ask; the server still validates
        result = cli(audience, "authz", *argv)
        assert (result.code, result.out) == (1, "")
        assert result.err.startswith(f"error: 400: {start}") and result.err.count("\n") == 1, result.err


def test_not_logged_in(cli, home):
    result = cli("app", "authz", "permissions", "--user-uuid", str(uuid.uuid4()))
    assert (result.code, result.err) == (1, "error: not logged in; run 'locky-app login' first\n")
    result = cli("admin", "authz", "batch", "-", stdin=f"{uuid.uuid4()},users,read\n")
    assert (result.code, result.err) == (1, "error: not logged in; run 'locky-admin login' first\n")
