"""``locky.storage.open_storage``: any registered storage by name, empty and ready, as the
contract suite's ``storage`` fixture wants it (the bundled one beside an author's own)."""

from __future__ import annotations

import pytest

from locky import ProviderError
from locky.storage import open_storage
from locky.testing import make_settings


def test_the_bundled_storage_opens_empty_and_migrated(tmp_path):
    storage = open_storage(make_settings(f"sqlite:///{tmp_path / 'contract.sqlite'}"))
    try:
        state = storage.schema()
        assert state.current == state.latest and not state.pending
        assert storage.users.count() == 0 and storage.groups.count() == 0
    finally:
        storage.close()


def test_an_unknown_storage_name_lists_the_known_ones(tmp_path):
    with pytest.raises(ProviderError, match=r"^unknown storage provider 'pnoy'; known: .*pony"):
        open_storage(make_settings(f"sqlite:///{tmp_path / 'contract.sqlite'}", storage="pnoy"))
