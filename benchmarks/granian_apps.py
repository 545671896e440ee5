"""WSGI apps for ``benchmarks.servers`` to hand to granian and to gunicorn's command
line: ``locky`` (the Locky app from the ``LOCKY_*`` environment, built in each worker)
and ``hello`` (bare Falcon)."""

from __future__ import annotations

from locky.app import create_app
from locky.settings import Settings

from .hello import make_app

locky = create_app(Settings.load())
hello = make_app()
