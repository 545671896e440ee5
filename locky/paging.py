"""Walking a whole keyset-paged list of a store, a page at a time."""

from __future__ import annotations

from typing import Any, Iterator

#: Records read per page (the largest page a list answers).
PAGE = 500


def every(store, **filters: Any) -> Iterator[Any]:
    """Every live record of ``store`` matching ``filters``, in id order, read in pages of
    :data:`PAGE` (``RecordStore.list``), so no one read grows with the table."""
    after = 0
    while True:
        page = store.list(after_id=after, limit=PAGE, **filters)
        yield from page.items
        if page.next_after_id is None:
            return
        after = page.next_after_id
