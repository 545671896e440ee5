"""The blocklist of common passwords (docs/http/accounts.md, password rules: "not in a blocklist of at
least 100,000 common passwords shipped in the package").

The list is ``locky/data/common-passwords.txt.gz``: the most common entries of the
SecLists "10 million password list, top 1M" (OWASP SecLists Project, Daniel Miessler and
Jason Haddix; passwords from Mark Burnett's xato.net ten million passwords set; MIT
licence), top 300,000 ranks, lower-cased, keeping those of 8 to 72 bytes: 115,387
distinct entries, most common first. ``locky/data/COMMON-PASSWORDS-LICENSE`` has the
source, how the file was made and the licence text.

The file is read through ``importlib.resources`` (so it works from a wheel or a zip),
once per process, on the first call, under a lock; the set is then a ``frozenset`` that
every thread reads without locking.
"""

from __future__ import annotations

import gzip
import threading
from importlib import resources

#: The data file, relative to the ``locky`` package.
DATA_FILE = ("data", "common-passwords.txt.gz")

_lock = threading.Lock()
_passwords: frozenset[str] | None = None


def _read() -> frozenset[str]:
    resource = resources.files("locky")
    for part in DATA_FILE:
        resource = resource / part
    text = gzip.decompress(resource.read_bytes()).decode("utf-8")
    return frozenset(line for line in text.split("\n") if line)


def _load() -> frozenset[str]:
    global _passwords
    passwords = _passwords
    if passwords is None:
        with _lock:
            passwords = _passwords
            if passwords is None:
                passwords = _passwords = _read()
    return passwords


def is_common(password: str) -> bool:
    """Whether ``password``, lower-cased (nothing else: no stripping), is on the list."""
    return password.lower() in _load()


def size() -> int:
    """How many distinct passwords the list holds."""
    return len(_load())
