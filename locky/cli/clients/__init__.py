"""Locky's command-line clients: ``locky-anonymous``, ``locky-app`` and ``locky-admin``.

Modules:

- :mod:`.http`: a small JSON-over-HTTP client on :mod:`urllib.request`.
- :mod:`.tokens`: the per-audience token store and the authenticated session that
  refreshes expired access tokens.
- :mod:`.output`: aligned tables for people, JSON for scripts.
- :mod:`.commands`: the shared parser plumbing, context and error reporting.
- :mod:`.session_commands`, :mod:`.record_commands`, :mod:`.account_commands`: the
  commands themselves (the last: verification, password reset and TOTP, docs/http/accounts.md).
- :mod:`.audit_commands`: ``locky-admin``'s audit trail and webhooks (docs/http/audit.md).
- :mod:`.anonymous`, :mod:`.app`, :mod:`.admin`: one entry point per audience.

Standard library only, so the clients work wherever the package installs.
"""
