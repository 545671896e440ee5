"""locky_rule_table: a Locky authorizer whose rules are rows of a SQLite table.

Offers the authorizer name ``rule-table``; choose it with ``LOCKY_AUTHORIZER=rule-table``.
"""

from __future__ import annotations

from locky import hookimpl

from .authorizer import RuleTableAuthorizer

__all__ = ["RuleTableAuthorizer", "locky_register_authorizers"]

NAME = "rule-table"


@hookimpl
def locky_register_authorizers(registry):
    registry.add(NAME, RuleTableAuthorizer)
