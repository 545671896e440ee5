"""Headless Chromium for the browser tests: whether it is on this machine, and a driver
started the one way every browser test starts it.

A test module calls :func:`require` before importing selenium: without a browser it is
skipped (CI sets ``LOCKY_REQUIRE_BROWSER=1``, which makes that an error instead).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMEDRIVER = "/usr/bin/chromedriver"
#: Headless, quiet (nothing of Chromium's own calls home: the tests' traffic stays on
#: 127.0.0.1), and the same window for every screenshot.
ARGUMENTS = ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
             "--window-size=1280,900", "--no-first-run", "--no-default-browser-check",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-default-apps", "--disable-extensions", "--password-store=basic",
             "--disable-features=Translate,OptimizationHints,MediaRouter,AutofillServerCommunication")


def missing() -> str | None:
    """Why the browser tests cannot run here, or ``None``."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install '.[test]')"
    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        return "no chromium browser (apt-get install chromium chromium-driver)"
    if not Path(CHROMEDRIVER).exists():
        return f"no {CHROMEDRIVER} (apt-get install chromium-driver)"
    return None


def require() -> None:
    """Skip the calling test module without a browser (fail with LOCKY_REQUIRE_BROWSER=1)."""
    reason = missing()
    if reason:
        if os.environ.get("LOCKY_REQUIRE_BROWSER") == "1":
            raise RuntimeError(f"LOCKY_REQUIRE_BROWSER=1 but {reason}")
        pytest.skip(f"browser tests skipped: {reason}", allow_module_level=True)


def chrome(*, performance_log: bool = True):
    """A new headless Chromium, its console (and, with ``performance_log``, its network)
    log kept for the test to read; quit it when done."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for argument in ARGUMENTS:
        options.add_argument(argument)
    logs = {"browser": "ALL", **({"performance": "ALL"} if performance_log else {})}
    options.set_capability("goog:loggingPrefs", logs)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
