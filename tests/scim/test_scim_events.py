"""One vocabulary of events (docs/events.md) for SCIM: every event a SCIM change records in the audit trail is
announced to plugins (``locky_event``) after its transaction commits, under the same
name, actor, target and details, ``details.via`` = ``"scim"`` included; a refused SCIM
request announces nothing."""

from __future__ import annotations

import pytest

from locky.plugins import hookimpl
from scim_helpers import PASSWORD, USER, assert_scim_error


class Recorder:
    """A plugin that keeps every event it is told of."""

    def __init__(self):
        self.events = []

    @hookimpl
    def locky_event(self, event):
        self.events.append(event)


@pytest.fixture
def recorder():
    return Recorder()


@pytest.fixture
def locky_plugins(recorder):
    return [recorder]


def test_plugins_hear_what_the_trail_records(scim, provisioner, locky_client, locky_admin, recorder):
    recorder.events.clear()
    user = scim.user("heard@example.com", "Heard", password=PASSWORD)
    group = scim.group("Heard", [user["id"]])
    assert scim.patch(f"/Users/{user['id']}", {"op": "replace", "path": "active", "value": False}).status_code == 200
    assert scim.delete(f"/Groups/{group['id']}").status_code == 204

    heard = [(e.name, e.actor_uuid, e.target_uuid, e.details) for e in recorder.events]
    names = [name for name, *_ in heard]
    assert names[:3] == ["user.registered", "group.created", "member.added"], names
    assert "user.disabled" in names and "group.deleted" in names, names
    # (The trail's actor_uuid filter takes a UUID only, not client:<client_id>: read it all.)
    result = locky_client.simulate_get("/v1/internal/audit", params={"limit": 500}, headers=locky_admin.headers)
    assert result.status_code == 200, result.text
    trail = [(e["event"], e["actor_uuid"], e["target_uuid"], e["details"]) for e in result.json["events"]
             if e["actor_uuid"] == provisioner.subject]
    assert heard == trail
    assert all(details["via"] == "scim" and actor == provisioner.subject for _, actor, _, details in heard)


def test_a_refused_request_announces_nothing(scim, recorder):
    scim.user("taken@example.com", "Taken")
    recorder.events.clear()
    assert_scim_error(scim.post("/Users", {"schemas": [USER], "userName": "TAKEN@example.com"}), 409, "uniqueness")
    assert_scim_error(scim.post("/Users", {"schemas": [USER], "userName": "short@example.com", "password": "x"}),
                      400, "invalidValue")
    assert recorder.events == []
