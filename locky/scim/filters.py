"""SCIM searches (RFC 7644 section 3.4.2) over Locky's stores.

``scim2-models`` parses the filter and evaluates it on a resource; this module picks
the records to evaluate it on:

- an indexed equality is a storage query: ``userName eq`` → ``UserStore.get_by_email``
  (case-insensitive, as the address is), ``externalId eq`` → the ``external_id``
  filter, ``id eq`` → ``get_by_uuid``, a group's ``displayName eq`` → the ``name``
  filter; the filter is then still evaluated on what they found (it may say more, and
  ``displayName`` compares without case);
- anything else (``co``, ``sw``, ``or``, ``not``, no filter at all ...) is evaluated
  over a scan of the live records in id order, bounded: past :data:`SCAN_CAP` records
  the search answers 400 ``tooMany`` (RFC 7644 section 3.12) rather than read the
  whole table on one request; a narrower filter gets an answer.

A search at the root (``GET /scim/v2?filter=...``, ``POST /scim/v2/.search``) covers
users then groups, each read as above. The matches are sorted (``sortBy``/``sortOrder``, else by id: the records' order) and
paged by ``startIndex``/``count``; ``totalResults`` counts every match.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Union

from scim2_models import ScimFilter, SearchRequest, TooManyException
from scim2_models.path import CompareOperator, Comparison
from scim2_server.storage import SearchPage
from scim2_server.utils import parametrize

from locky.paging import every

from . import mapping
from .uuids import record_uuid

#: The widest value an indexed column holds (emails 254, names and external ids 255).
MAX_INDEXED = 255
#: The most records a search that no index answers reads (users or groups).
SCAN_CAP = 5000


def _indexed(kind: str, node) -> tuple[str, str] | None:
    """``(attribute, value)`` when the filter is one ``eq`` a store answers."""
    if not isinstance(node, Comparison) or node.op != CompareOperator.eq or not isinstance(node.value, str):
        return None
    attribute = str(node.attr_path).rsplit(":", 1)[-1].lower()
    if attribute in ("id", "externalid") or (kind == "User" and attribute == "username") \
            or (kind == "Group" and attribute == "displayname"):
        return attribute, node.value
    return None


def _records(context, kind: str, scim_filter) -> list:
    """The records to evaluate the filter on."""
    store = context.storage.users if kind == "User" else context.storage.groups
    found = _indexed(kind, scim_filter.ast) if scim_filter is not None else None
    if found is not None:
        attribute, value = found
        if attribute == "id":
            record = store.get_by_uuid(record_uuid(value)) if record_uuid(value) else None
            return [record] if record is not None else []
        if len(value) > MAX_INDEXED:  # wider than the column: nothing stored has it
            return []
        if attribute == "username":
            record = store.get_by_email(value)
            return [record] if record is not None else []
        if attribute == "externalid":
            return list(islice(every(store, external_id=value), SCAN_CAP))
        return list(islice(every(store, name=value), SCAN_CAP))
    records = list(islice(every(store), SCAN_CAP + 1))
    if len(records) > SCAN_CAP:
        raise TooManyException(detail=f"This search would read more than {SCAN_CAP} records: give a filter"
                                      " on userName, externalId or id (displayName for groups) with eq.")
    return records


def search(context, kinds: list[str], search_request: SearchRequest[Any]) -> SearchPage:
    """One page of the resources of ``kinds`` (``User``, ``Group``: one of them, or both
    for a search at the root, RFC 7644 section 3.4.2.1) the request selects."""
    scim_filter = search_request.filter
    start = search_request.start_index_0 or 0
    stop = None if search_request.count is None else start + search_request.count
    if scim_filter is None and search_request.sort_by is None:
        # Every record matches, in id order: only the page answered becomes a resource.
        records = [(kind, r) for kind in kinds for r in _records(context, kind, None)]
        return SearchPage(len(records), _whole(context, records[start:stop]))
    # A user's groups and a group's members (and so its version) cost reads of
    # memberships and groups: read them only for the page answered, unless the filter
    # or the order looks at them.
    looked_at = f"{scim_filter or ''} {search_request.sort_by or ''}".lower()
    complete = any(word in looked_at for word in ("groups", "members", "version"))
    resources, records = [], {}
    for kind in kinds:
        read = _records(context, kind, scim_filter)
        if complete:
            resources += mapping.resources(context, kind, read)
        else:
            resources += [mapping.user_resource(context, r, []) if kind == "User"
                          else mapping.group_resource(context, r, []) for r in read]
            records.update(((kind, r.uuid), r) for r in read)
    if scim_filter is not None and not scim_filter.models and resources:
        models = tuple(dict.fromkeys(type(r) for r in resources))
        scim_filter = parametrize(ScimFilter, Union[models])(str(scim_filter))  # noqa: UP007
    found = [r for r in resources if scim_filter is None or scim_filter.match(r)]
    if search_request.sort_by is not None:
        found = search_request.sort(found)
    page = found[start:stop]
    if not complete:  # the page answered, now with its memberships (and true versions)
        page = _whole(context, [(r.meta.resource_type, records[(r.meta.resource_type, r.id)]) for r in page])
    return SearchPage(len(found), page)


def _whole(context, records: list[tuple[str, Any]]) -> list:
    """The whole resources (with their memberships) of ``(kind, record)`` pairs, in
    order: the memberships of each kind's records read at once (:func:`mapping.resources`)."""
    made = {kind: iter(mapping.resources(context, kind, [r for k, r in records if k == kind]))
            for kind in dict.fromkeys(kind for kind, _ in records)}
    return [next(made[kind]) for kind, _ in records]

