"""Headless Chromium from Debian (chromium, chromium-driver), driven by selenium through
/usr/bin/chromedriver: nothing is downloaded (SE_OFFLINE, explicit driver and browser)."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest


def chrome(profile: Path, size: tuple[int, int] = (1500, 900)):
    """A headless Chromium WebDriver, or a skip naming what is missing."""
    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.skip("needs Debian's chromium and chromium-driver (deploy/apt-packages.txt)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # selenium-manager must not look for downloads
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser
    for a in (
        "--headless=new",
        "--no-sandbox",  # root in a test namespace
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-default-apps",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        f"--window-size={size[0]},{size[1]}",
    ):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console_errors reads it
    return webdriver.Chrome(options=opts, service=Service(executable_path=driver))


def wait_for(drv, find, timeout: float, what: str):
    """Poll find(drv) until it returns something true; its value, or a failure naming what
    was awaited (and the page's status line)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = find(drv)
        except Exception:  # the element went stale between two redraws: look again
            got = None
        if got:
            return got
        if time.monotonic() > deadline:
            status = drv.execute_script(
                "const e = document.getElementById('status'); return e && e.textContent;"
            )
            raise AssertionError(f"{what}: not within {timeout:g} s (page status: {status})")
        time.sleep(0.2)


def css(drv, selector: str) -> list:
    from selenium.webdriver.common.by import By

    return drv.find_elements(By.CSS_SELECTOR, selector)


def console_errors(drv) -> list[str]:
    """The page's console errors (and failed loads) since the last call."""
    return [e["message"] for e in drv.get_log("browser") if e["level"] == "SEVERE"]
