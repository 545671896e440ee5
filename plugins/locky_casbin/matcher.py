"""Locky's own Casbin model, decided without evaluating its matcher text for every line.

Casbin (pycasbin) decides a request by parsing the model's matcher with ``ast.parse`` and
walking it with ``simpleeval`` once per policy line: about 30 µs a line and 90 µs a call
here, so a decision that is not in the snapshot's cache cost 0.3-0.5 ms.

When the loaded model is the one Locky ships (``policies/model.conf``: the same request,
policy and role definitions, effect and matcher, as Casbin parses them), a line is
decided here instead, by the same rule written as Python::

    g(r.sub, p.sub) && (p.dom == "*" || p.dom == r.dom)
                    && (p.obj == "*" || p.obj == r.obj) && (p.act == "*" || g2(r.act, p.act))

with ``g`` and ``g2`` answered by Casbin's own role managers (``has_link``, the very
functions Casbin's matcher calls), each answer kept for the snapshot's life. A model
that differs in anything is decided by Casbin, as before. ``tests/test_policy_matcher.py``
holds both to the same answers over random policies and requests.
"""

from __future__ import annotations

import functools
from typing import Callable

import casbin

from . import policy_files

#: A line ``[sub, dom, obj, act]`` and a request ``(sub, dom, obj, act)``: does it allow?
LineRule = Callable[[list, str, str, str, str], bool]
#: Role-manager answers kept per snapshot before the memo starts over.
MEMO_SIZE = 65536


def _signature(model: casbin.Model) -> tuple | None:
    """What decides a request in ``model``: its definitions, effect and matcher as Casbin
    parsed them (``None`` when a section Locky needs is missing)."""
    try:
        roles = model["g"] if "g" in model.keys() else {}
        return (
            tuple(model["r"]["r"].tokens), tuple(model["p"]["p"].tokens),
            model["p"]["p"].priority_index,
            tuple(sorted((key, assertion.value) for key, assertion in roles.items())),
            model["e"]["e"].value, model["m"]["m"].value,
            tuple(sorted(model.keys())), tuple(sorted(model["p"])), tuple(sorted(model["m"])),
        )
    except (KeyError, AttributeError):
        return None


@functools.cache
def shipped_signature() -> tuple | None:
    """:func:`_signature` of the shipped ``model.conf``, read on first use (``None`` when
    it cannot be read: every model is then left to Casbin)."""
    try:
        text = (policy_files.policy_dir(None) / "model.conf").read_text(encoding="utf-8")
    except OSError:
        return None
    model = casbin.Model()
    model.load_model_from_text(text)
    return _signature(model)


def line_rule(enforcer: casbin.Enforcer) -> LineRule | None:
    """The rule that decides one line for ``enforcer``'s model when it is Locky's own
    (``None`` otherwise: Casbin then evaluates the model's matcher)."""
    shipped = shipped_signature()
    if shipped is None or _signature(enforcer.model) != shipped or enforcer.cond_rm_map:
        return None
    g, g2 = enforcer.model["g"]["g"].rm, enforcer.model["g"]["g2"].rm
    linked: dict[tuple[str, str], bool] = {}
    inherits: dict[tuple[str, str], bool] = {}

    def has_link(memo: dict, manager, name1: str, name2: str) -> bool:
        found = memo.get((name1, name2))
        if found is None:
            # The role manager creates the roles it is asked about: one thread at a time.
            with policy_files.EVALUATION:
                found = bool(manager.has_link(name1, name2)) if manager else name1 == name2
            if len(memo) > MEMO_SIZE:
                memo.clear()
            memo[(name1, name2)] = found
        return found

    def allows(line: list, sub: str, dom: str, obj: str, act: str) -> bool:
        p_sub, p_dom, p_obj, p_act = line
        return ((p_dom == "*" or p_dom == dom) and (p_obj == "*" or p_obj == obj)
                and (p_act == "*" or has_link(inherits, g2, act, p_act))
                and has_link(linked, g, sub, p_sub))

    return allows
