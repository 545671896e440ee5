"""Locky's own tests use the fixtures of ``locky.testing`` (loaded as a pytest plugin
through its ``pytest11`` entry point); shared helpers beyond those live here."""
