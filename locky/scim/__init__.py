"""SCIM 2.0 provisioning (RFC 7643, RFC 7644) at ``/scim/v2`` (docs/http/scim.md).

Built on two libraries rather than a hand-rolled protocol:

- ``scim2-models`` gives the resource, message and error models (pydantic), their
  SCIM-context validation (a ``readOnly`` attribute in a request is ignored, a
  ``writeOnly`` one never returned), the filter parser and evaluator, PATCH
  application with paths (``members[value eq "..."]``) and sorting.
- ``scim2-server`` gives the protocol steps without storage or web framework:
  routing a path to an operation, reading and validating bodies, applying PUT and
  PATCH to a resource, conditional requests (``If-Match`` → 412), paging, attribute
  selection and SCIM error bodies. Its :class:`~scim2_server.handler.ScimHandler`
  calls a :class:`~scim2_server.storage.ScimStorage` between those steps, and
  :mod:`locky.scim.storage` is that storage over Locky's own stores. Its
  Werkzeug/ASGI applications and its in-memory storage are not used: Falcon serves
  the routes (:mod:`locky.scim.routes`) and Locky's stores keep the records.
- ``scim2-filter-parser`` (also on PyPI) is not used: it turns a filter into SQL for
  Django-style tables, while ``scim2-models`` parses and evaluates filters on the very
  models the server answers with; Locky's indexed equalities (:mod:`locky.scim.filters`)
  are the only part that becomes a storage query.

So a change through SCIM is the change ``/v1`` makes (the same store calls, rules,
soft delete, audit events and webhooks, with ``details.via = "scim"``):
:mod:`locky.scim.users` and :mod:`locky.scim.groups` call the functions ``/v1`` calls.
"""
