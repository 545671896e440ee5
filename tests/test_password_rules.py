"""The password rules of docs/http/accounts.md, as one function (the HTTP tests are in tests/lifecycle)."""

from __future__ import annotations

import pytest

from locky.accounts import password_rules
from locky.errors import Invalid


@pytest.mark.parametrize("password, email, name, refused", [
    ("correct horse battery", "ada@example.com", "Ada", None),
    ("short", "ada@example.com", "Ada", password_rules.TOO_SHORT_OR_LONG),
    ("€" * 25, "ada@example.com", "Ada", password_rules.TOO_SHORT_OR_LONG),  # 75 bytes
    ("password1", "ada@example.com", "Ada", password_rules.COMMON),
    ("PassWord1", "ada@example.com", "Ada", password_rules.COMMON),
    ("my-zebrafish-pass", "zebrafish@example.com", "Z", password_rules.PERSONAL),
    ("xMARGARETHEx99", "m@example.com", "Margarethe", password_rules.PERSONAL),
    ("margarethe", "m@example.com", "Margarethe", password_rules.PERSONAL),
    ("bob-likes-long-walks", "bob@example.com", "Bob", None),  # 3 characters: not checked
    ("ünïcödé-passphrase", "ada@example.com", "Ada", None),
])
def test_rules(password, email, name, refused):
    assert password_rules.problem(password, email=email, name=name) == refused
    if refused:
        with pytest.raises(Invalid) as caught:
            password_rules.check(password, email=email, name=name)
        assert caught.value.fields == {"password": refused}
    else:
        password_rules.check(password, email=email, name=name)
