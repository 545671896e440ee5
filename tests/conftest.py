"""Locky's own tests use the fixtures of ``locky.testing`` (loaded as a pytest plugin
through its ``pytest11`` entry point); shared helpers beyond those live here."""

# Real database servers for the storage tests (PostgreSQL, MariaDB/MySQL).
from backends import database_url, mysql_database, postgres_database, server_url  # noqa: E402,F401
