"""The policy revision travels with the request, on its ``Identity``, and nothing about it
is shared between apps: two apps in one process (two SQLite files) decide each from its
own storage, and the revision read at authentication belongs to that request only.

Before, the revision went from the middleware to the authorizer through a module-level
context variable: an app deciding while another app's request was being served took
that request's revision for its own, and kept using a policy it had since changed.
"""

from __future__ import annotations

from typing import Any

import pytest
from authz_helpers import add_member, check, create_group, create_role, role_id

from locky import Identity, Operation, Route, hookimpl
from locky.testing import ADMIN_EMAIL, LockyClient

PROBE = "/v1/internal/probe"


class Probe:
    """``GET /v1/internal/probe``: this request's revision, and what ``other`` (another
    app, when set) decides about ``question`` while this request is being served."""

    def __init__(self):
        self.other: Any = None
        self.question: tuple | None = None

    def on_get(self, req, resp):
        answer: dict[str, Any] = {"revision": req.context.identity.policy_revision}
        if self.other is not None:
            user, resource, action, group_uuid = self.question
            answer["other_allows"] = self.other.context.allowed(Identity(user=user), resource, action,
                                                                group_uuid=group_uuid)
        resp.media = answer


class ProbePlugin:
    def __init__(self, probe: Probe):
        self.probe = probe

    @hookimpl
    def locky_routes(self, context):
        return [Route(PROBE, self.probe, (Operation("get", "Probe", "probe"),))]


@pytest.fixture
def probe():
    return Probe()


@pytest.fixture
def two_apps(locky_app_factory, tmp_path, probe):
    # Each its own mail folder too: the admin of each verifies with its own app's code.
    first = locky_app_factory([ProbePlugin(probe)], database_url=f"sqlite:///{tmp_path / 'first.sqlite'}",
                              mail_dir=str(tmp_path / "first-mail"))
    second = locky_app_factory([], database_url=f"sqlite:///{tmp_path / 'second.sqlite'}",
                               mail_dir=str(tmp_path / "second-mail"))
    return first, second


def set_up(app) -> tuple[LockyClient, Any, Any, dict]:
    """An admin, a user Bob who is an ``auditor`` (reports/read) of a group, in ``app``."""
    client = LockyClient(app)
    admin = client.account(ADMIN_EMAIL, verified=True)
    bob = client.account("bob@example.com")
    group = create_group(client, admin, "Finance")
    create_role(client, admin, "auditor", [("reports", "read")])
    add_member(client, admin, group, bob.uuid, "auditor")
    assert check(client, admin, bob.uuid, "reports", "read", group["uuid"]) is True
    return client, admin, bob, group


def test_each_request_carries_the_revision_read_at_its_authentication(two_apps):
    first, second = two_apps
    client, admin, bob, group = set_up(first)
    before = client.simulate_get(PROBE, headers=bob.headers)
    assert before.status_code == 200, before.text
    assert before.json["revision"] == first.context.storage.revision()

    updated = client.simulate_put(f"/v1/private/roles/{role_id(client, admin, 'auditor')}", headers=admin.headers,
                                  json={"permissions": []})
    assert updated.status_code == 200, updated.text
    after = client.simulate_get(PROBE, headers=bob.headers)
    assert after.json["revision"] == first.context.storage.revision() > before.json["revision"]
    assert check(client, admin, bob.uuid, "reports", "read", group["uuid"]) is False

    # The other app's storage never moved with it.
    assert second.context.storage.revision() < after.json["revision"]


def test_a_role_change_in_one_app_never_changes_the_other_apps_decisions(two_apps, probe):
    first, second = two_apps
    one, one_admin, one_bob, one_group = set_up(first)
    two, two_admin, two_bob, two_group = set_up(second)

    # Bring both storages to the same revision, so that a revision taken from the wrong
    # app would look current to the other one.
    for app in (first, second):
        while app.context.storage.revision() < max(first.context.storage.revision(),
                                                   second.context.storage.revision()):
            app.context.storage.grants.grant("00000000-0000-4000-8000-000000000000", "nobody")
            app.context.storage.grants.revoke("00000000-0000-4000-8000-000000000000", "nobody")
    shared = first.context.storage.revision()
    assert second.context.storage.revision() == shared
    bob_in_second = second.context.storage.users.get_by_uuid(two_bob.uuid)
    question = (bob_in_second, "reports", "read", two_group["uuid"])
    assert second.context.allowed(Identity(user=bob_in_second), *question[1:3], group_uuid=question[3]) is True

    # The second app takes the permission away; the first app changes nothing.
    taken = two.simulate_put(f"/v1/private/roles/{role_id(two, two_admin, 'auditor')}", headers=two_admin.headers,
                             json={"permissions": []})
    assert taken.status_code == 200, taken.text

    # Asked while a request of the first app (revision `shared`) is being served, the
    # second app still decides with its own, newer policy.
    probe.other, probe.question = second, question
    during = one.simulate_get(PROBE, headers=one_bob.headers)
    assert during.status_code == 200, during.text
    assert during.json == {"revision": shared, "other_allows": False}

    # Each app's own decisions: the first app's auditors still read, the second's do not.
    assert check(one, one_admin, one_bob.uuid, "reports", "read", one_group["uuid"]) is True
    assert check(two, two_admin, two_bob.uuid, "reports", "read", two_group["uuid"]) is False
    assert first.context.storage.revision() == shared
