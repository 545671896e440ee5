"""What Locky's own tests and benchmarks start around the service, kept out of the wheel.

- :mod:`support.server`: a real ``locky serve`` process on 127.0.0.1;
- :mod:`support.pgbouncer`: PgBouncer in transaction pooling mode before a test database;
- :mod:`support.replica_cluster`: a private PostgreSQL primary with a streaming standby.

Plugin authors get theirs from :mod:`locky.testing` (fixtures, ``make_settings``, the
contract suites, throwaway server databases); nothing here is installed. Tests import it
as ``support`` (``tests/`` is on ``sys.path`` through its ``conftest.py``), the
benchmarks, run from the checkout's root, as ``tests.support``; the modules import one
another relatively, so either name works.
"""
