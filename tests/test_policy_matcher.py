"""Locky's own model is decided in Python (``locky_casbin.matcher``) exactly as Casbin
decides it by evaluating the matcher: over random policies (``p`` lines with ``*`` and
``self`` scopes, wildcards, ``g`` chains between users, emails and roles, deeper than
Casbin's 10 levels too, ``g2`` chains between actions) and random requests, a snapshot
deciding line by line and the same snapshot handing every line to Casbin give the same
answer and the same explanation. Any other model is left to Casbin.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from locky_casbin import _PolicySnapshot, matcher, policy_files

SUBJECTS = ["user", "admin", "r0", "r1", "r2", "r3", "3f0c8a52-1b7e-4a57-9a59-1d6f2c1f0e11", "ann@example.com"]
ROLES = ["user", "admin", "r0", "r1", "r2", "r3"]
DOMS = ["*", "self"]
OBJECTS = ["users", "groups", "app.res0", "*"]
ACTIONS = ["read", "write", "create", "update", "delete", "assign:r1", "assign:custom", "*"]

p_lines = st.lists(st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(DOMS), st.sampled_from(OBJECTS),
                             st.sampled_from(ACTIONS)), max_size=25)
g_lines = st.lists(st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(ROLES)), max_size=10)
g2_lines = st.lists(st.tuples(st.sampled_from(ACTIONS[:-1]), st.sampled_from(ACTIONS[:-1])), max_size=6)
requests = st.lists(st.tuples(st.sampled_from(SUBJECTS), st.sampled_from(DOMS),
                              st.sampled_from([o for o in OBJECTS if o != "*"] + ["other"]),
                              st.sampled_from([a for a in ACTIONS if a != "*"] + ["other"])),
                    min_size=1, max_size=30)


def snapshots(rows: list[list[str]], custom=None) -> tuple[_PolicySnapshot, _PolicySnapshot]:
    """The same policy twice: deciding line by line in Python, and by Casbin's matcher."""
    files = policy_files.PolicyFiles(model_text=policy_files.load(None).model_text, rows=rows)
    fast, by_casbin = _PolicySnapshot(files, custom or {}), _PolicySnapshot(files, custom or {})
    by_casbin.rule = None
    return fast, by_casbin


def test_the_shipped_model_is_decided_in_python_and_the_shipped_policy_agrees():
    fast, by_casbin = snapshots(policy_files.load(None).rows)
    assert fast.rule is not None
    for subject in sorted(fast.roles()) + ["user"]:
        for dom in DOMS:
            for obj in ("users", "groups", "members", "roles", "authz", "sessions", "clients", "audit", "other"):
                for act in ("read", "create", "update", "delete", "disable", "write", "assign:owner",
                            "assign:custom", "assign:member"):
                    assert fast.enforce(subject, dom, obj, act) is by_casbin.enforce(subject, dom, obj, act), \
                        (subject, dom, obj, act)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(p_lines, g_lines, g2_lines, requests)
def test_python_and_casbin_decide_alike(p, g, g2, asked):
    rows = [["p", *line] for line in p] + [["g", *line] for line in g] + [["g2", *line] for line in g2]
    fast, by_casbin = snapshots(rows)
    for request in asked:
        assert fast.enforce(*request) is by_casbin.enforce(*request), request
        # The same lines; their order follows Casbin's role manager, which keeps a role's
        # roles in a set (of objects hashed by identity): it differs between snapshots.
        assert sorted(fast.matching(*request)) == sorted(by_casbin.matching(*request)), request


def test_a_role_chain_longer_than_casbins_ten_levels_is_cut_where_casbin_cuts_it():
    chain = [f"c{i}" for i in range(14)]
    rows = [["g", "user", chain[0]]] + [["g", a, b] for a, b in zip(chain, chain[1:])]
    rows += [["p", role, "*", f"res-{role}", "read"] for role in chain]
    fast, by_casbin = snapshots(rows)
    answers = [fast.enforce("user", "*", f"res-{role}", "read") for role in chain]
    assert answers == [by_casbin.enforce("user", "*", f"res-{role}", "read") for role in chain]
    assert answers[0] is True and answers[-1] is False  # the chain's far end is beyond reach


def test_custom_roles_and_assign_custom_are_decided_alike():
    from locky import Permission

    custom = {"editor": (Permission("docs", "write"), Permission("*", "read"))}
    rows = [["p", "owner", "*", "members", ASSIGN] for ASSIGN in ("assign:custom",)] + [["g2", "create", "write"]]
    fast, by_casbin = snapshots(rows, custom)
    for request in (("editor", "*", "docs", "create"), ("editor", "*", "docs", "read"), ("editor", "*", "x", "read"),
                    ("editor", "self", "docs", "delete"), ("owner", "*", "members", "assign:editor"),
                    ("owner", "*", "members", "assign:owner")):
        assert fast.enforce(*request) is by_casbin.enforce(*request), request
    assert fast.enforce("owner", "*", "members", "assign:editor") is True


@pytest.mark.parametrize("change", [
    ("(p.dom == \"*\" || p.dom == r.dom) && ", ""),  # scopes ignored
    ("p.obj == \"*\" ||", "keyMatch(r.obj, p.obj) ||"),  # another function
    ("e = some(where (p.eft == allow))", "e = !some(where (p.eft == deny))"),  # another effect
])
def test_any_other_model_is_left_to_casbin(change):
    text = policy_files.load(None).model_text
    assert change[0] in text
    files = policy_files.PolicyFiles(model_text=text.replace(*change), rows=[["p", "user", "*", "users", "read"]])
    snapshot = _PolicySnapshot(files, {})
    assert snapshot.rule is None
    assert matcher.shipped_signature() is not None
    assert snapshot.enforce("user", "*", "users", "read") is True
