"""The public API is one place and the interfaces are the specification.

Every name in ``locky.__all__`` resolves; the lazy ``_EXPORTS`` map, the
``TYPE_CHECKING`` imports and ``__all__`` name the same things; every Protocol of
:mod:`locky.providers` and every record of :mod:`locky.records` is exported; and every
public method of every provider interface has a docstring, since the docstrings are
what a plugin author implements against.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
import uuid
from datetime import datetime, timezone
from pathlib import Path

import pytest

import locky
from locky import providers, records

INIT = Path(locky.__file__)
ROOT = INIT.parents[1]
VALUE_RULES = ("MAX_ID", "ROLE_NAME", "UUID4", "utcnow")


def protocols() -> list[type]:
    return [obj for obj in vars(providers).values()
            if inspect.isclass(obj) and obj.__module__ == providers.__name__ and getattr(obj, "_is_protocol", False)]


def record_classes() -> list[type]:
    return [obj for obj in vars(records).values()
            if inspect.isclass(obj) and obj.__module__ == records.__name__ and dataclasses.is_dataclass(obj)]


def type_checking_names() -> set[str]:
    """The names imported under ``if TYPE_CHECKING:`` in ``locky/__init__.py``."""
    tree = ast.parse(INIT.read_text())
    block = next(node for node in tree.body if isinstance(node, ast.If)
                 and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
    return {alias.asname or alias.name for node in ast.walk(block) if isinstance(node, ast.ImportFrom)
            for alias in node.names}


@pytest.mark.parametrize("name", sorted(locky.__all__))
def test_every_export_resolves(name):
    value = getattr(locky, name)
    if name != "__version__":
        module = importlib.import_module(locky._EXPORTS[name])
        assert getattr(module, name) is value


def test_the_map_the_type_checking_block_and_all_agree():
    listed = set(locky.__all__) - {"__version__"}
    assert listed == set(locky._EXPORTS), listed ^ set(locky._EXPORTS)
    assert type_checking_names() == listed, type_checking_names() ^ listed
    assert len(locky.__all__) == len(set(locky.__all__))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError):
        locky.NoSuchThing  # noqa: B018


@pytest.mark.parametrize("cls", protocols(), ids=lambda c: c.__name__)
def test_every_interface_is_exported(cls):
    assert locky._EXPORTS.get(cls.__name__) == "locky.providers", f"export {cls.__name__} from locky"


@pytest.mark.parametrize("cls", record_classes(), ids=lambda c: c.__name__)
def test_every_record_is_exported(cls):
    assert locky._EXPORTS.get(cls.__name__) == "locky.records", f"export {cls.__name__} from locky"


@pytest.mark.parametrize("cls", protocols(), ids=lambda c: c.__name__)
def test_every_interface_and_its_methods_have_docstrings(cls):
    assert inspect.getdoc(cls), f"{cls.__name__} has no docstring"
    undocumented = [name for name, member in inspect.getmembers(cls, inspect.isfunction)
                    if not name.startswith("_") and not (member.__doc__ or "").strip()]
    assert not undocumented, f"{cls.__name__}: no docstring on {undocumented}"


def test_every_store_of_storage_is_an_interface():
    """``Storage``'s attributes are the store Protocols, each documented and exported."""
    stores = {name: hint for name, hint in providers.Storage.__annotations__.items()}
    assert len(stores) == 18
    for name, hint in stores.items():
        cls = getattr(providers, hint)
        assert cls in protocols(), (name, hint)


@pytest.mark.parametrize("cls", record_classes(), ids=lambda c: c.__name__)
def test_every_record_is_a_frozen_dataclass(cls):
    assert cls.__dataclass_params__.frozen, cls


@pytest.mark.parametrize("cls", record_classes(), ids=lambda c: c.__name__)
def test_every_record_has_a_docstring_of_its_own(cls):
    # A dataclass without one gets its signature as ``__doc__``.
    assert cls.__doc__ and not cls.__doc__.startswith(f"{cls.__name__}("), f"{cls.__name__} has no docstring"


@pytest.mark.parametrize("name", VALUE_RULES)
def test_a_rule_of_record_values_is_exported_and_written_once(name):
    assert locky._EXPORTS[name] == "locky.records"
    # A plugin imports it from ``locky``; the core from ``locky.records``: no copies.
    defined = re.compile(rf"^\s*(def {name}\(|{name} = )", re.M)
    copies = [str(path.relative_to(ROOT)) for folder in ("locky", "plugins", "contrib", "examples")
              for path in sorted((ROOT / folder).rglob("*.py")) if defined.search(path.read_text())]
    assert copies == ["locky/records.py"], copies


def test_the_rules_of_record_values():
    assert locky.MAX_ID == 2**63 - 1
    made = str(uuid.uuid4())
    assert locky.UUID4.fullmatch(made)
    for other in (made.upper(), str(uuid.uuid1()), made + "\n", made.replace("-", ""), f"{{{made}}}"):
        assert not locky.UUID4.fullmatch(other), other
    assert locky.ROLE_NAME.fullmatch("auditor") and locky.ROLE_NAME.fullmatch("a" * 64)
    for name in ("Auditor", "1st", "a" * 65, "admin\n", ""):
        assert not locky.ROLE_NAME.fullmatch(name), name
    now = locky.utcnow()
    assert now.tzinfo is None  # naive UTC, as records hold times
    assert abs(now - datetime.now(timezone.utc).replace(tzinfo=None)).total_seconds() < 5
