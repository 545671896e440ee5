"""The password hasher contract suite: one set of tests of :class:`locky.providers.PasswordHasher`.

Subclass :class:`PasswordHasherContract` in a test module and override its ``hasher``
fixture to return your hasher (cheap parameters are fine: the suite checks behaviour,
not cost)::

    from locky.testing.password_hasher_contract import PasswordHasherContract

    class TestScrypt(PasswordHasherContract):
        @pytest.fixture
        def hasher(self):
            return ScryptHasher(n=2**10)

Passwords reach a hasher already validated: 8 to 72 bytes of UTF-8 (docs/http/records.md).
"""

from __future__ import annotations

import pytest

from locky.providers import PasswordHasher

PASSWORD = "correct horse battery"
#: 72 bytes of UTF-8, the longest password Locky accepts, in multi-byte characters.
LONGEST = "é" * 36
UNICODE = ("pässwörd 🔒 пароль 密码", "ﬁancé-ﬂow", "e\u0301tude-long")


class PasswordHasherContract:
    """The tests every password hasher must pass. Override :meth:`hasher`."""

    @pytest.fixture
    def hasher(self) -> PasswordHasher:
        """The hasher under test; subclasses override this fixture."""
        pytest.fail("a PasswordHasherContract subclass must override the `hasher` fixture", pytrace=False)

    def test_hash_is_text_that_verifies(self, hasher):
        hashed = hasher.hash(PASSWORD)
        assert isinstance(hashed, str) and hashed
        assert hasher.verify(PASSWORD, hashed) is True

    def test_hash_is_salted(self, hasher):
        """Two hashes of one password differ (a random salt), and both verify."""
        first, second = hasher.hash(PASSWORD), hasher.hash(PASSWORD)
        assert first != second
        assert hasher.verify(PASSWORD, first) and hasher.verify(PASSWORD, second)

    def test_hash_never_holds_the_password(self, hasher):
        for password in (PASSWORD, "Passw0rd-Passw0rd", LONGEST, *UNICODE):
            hashed = hasher.hash(password)
            assert password not in hashed
            assert password.encode().hex() not in hashed
            assert password.encode("utf-8").decode("latin-1") not in hashed

    @pytest.mark.parametrize("wrong", ["correct horse batterY", "correct horse battery ", "correct horse",
                                       "", "Correct Horse Battery"])
    def test_a_wrong_password_does_not_verify(self, hasher, wrong):
        assert hasher.verify(wrong, hasher.hash(PASSWORD)) is False

    @pytest.mark.parametrize("hashed", ["", "not a hash", "$2b$04$short", "$argon2id$v=19$m=1,t=1,p=1$x$y",
                                        "x" * 200, "\x00", PASSWORD])
    def test_a_hash_it_cannot_read_is_false_not_an_error(self, hasher, hashed):
        assert hasher.verify(PASSWORD, hashed) is False

    def test_unicode_passwords(self, hasher):
        for password in UNICODE:
            hashed = hasher.hash(password)
            assert hasher.verify(password, hashed) is True
        # Composed and decomposed forms are different passwords (no normalisation).
        composed, decomposed = "\u00e9tude-long", "e\u0301tude-long"
        assert hasher.verify(composed, hasher.hash(decomposed)) is False

    def test_the_longest_password_counts_every_byte(self, hasher):
        """72 bytes verify, and a password differing only in its last character does
        not (no truncation below Locky's limit)."""
        assert len(LONGEST.encode()) == 72
        hashed = hasher.hash(LONGEST)
        assert hasher.verify(LONGEST, hashed) is True
        assert hasher.verify(LONGEST[:-1] + "è", hashed) is False
        assert hasher.verify(LONGEST[:-1], hashed) is False

    def test_a_longer_password_never_matches_a_truncated_one(self, hasher):
        """A password over 72 bytes is refused before the hasher; but a hasher that
        truncates would let one match the hash of its first 72 bytes: it must not."""
        hashed = hasher.hash(LONGEST)
        assert hasher.verify(LONGEST + "x", hashed) is False

    def test_needs_rehash(self, hasher):
        hashed = hasher.hash(PASSWORD)
        assert hasher.needs_rehash(hashed) is False
        assert hasher.needs_rehash("not a hash") is True
