"""Locky's benchmark harness: ``python -m benchmarks.run`` (see docs/benchmarks.md).

Not collected by the test suite (``testpaths = ["tests"]``); nothing here imports pytest.
"""
