"""Open a rendered page in real headless Chromium: a screenshot to look at, and what the page said on the console.

Debian's ``chromium`` package (installed here when missing and running as root, like PostgreSQL's server);
``STREAMCERT_CHROMIUM`` names another binary. Runs in the caller's process, one short-lived browser per page.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from streamcert.harness.errors import PrerequisiteMissing
from streamcert.harness.stack.cache import cache_lock
from streamcert.harness.stack.install import apt_install

__all__ = ["PageShot", "ensure_chromium", "find_chromium", "screenshot"]

_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
#: Console lines of a page (Chromium logs them as ``INFO:CONSOLE:<line>] "message"``) and failed loads.
_CONSOLE = re.compile(r"CONSOLE[:(]\d+|Failed to load resource|Uncaught")


@dataclass(frozen=True)
class PageShot:
    """A page as Chromium drew it: the screenshot's path and the page's console messages (errors included)."""

    png: Path
    console: list[str]


def find_chromium() -> str | None:
    override = os.environ.get("STREAMCERT_CHROMIUM")
    if override:
        return override if Path(override).exists() else None
    return next((found for name in _NAMES if (found := shutil.which(name))), None)


def ensure_chromium() -> str:
    """The Chromium binary, installing Debian's package when it is missing and this runs as root."""
    found = find_chromium()
    if found:
        return found
    if os.environ.get("STREAMCERT_CHROMIUM"):
        raise PrerequisiteMissing(f"STREAMCERT_CHROMIUM={os.environ['STREAMCERT_CHROMIUM']} does not exist.",
                                  hint="Point it at a Chromium or Chrome binary.")
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise PrerequisiteMissing("Chromium is not installed, and streamcert can only install it itself when "
                                  "running as root on Debian/Ubuntu.",
                                  hint="Install it (`sudo apt-get install chromium`) or set STREAMCERT_CHROMIUM.")
    with cache_lock("chromium-apt"):
        if not find_chromium():
            apt_install("chromium", "Chromium", "Install the chromium package by hand, or set STREAMCERT_CHROMIUM.")
    found = find_chromium()
    if not found:
        raise PrerequisiteMissing("apt-get installed chromium but no chromium binary is on PATH.",
                                  hint="Set STREAMCERT_CHROMIUM to the browser's binary.")
    return found


def screenshot(page: Path, png: Path, width: int = 1280, height: int = 2000, timeout_s: float = 90.0) -> PageShot:
    """Draw ``page`` (a local HTML file) headless at ``width`` x ``height`` into ``png``."""
    browser = ensure_chromium()
    with tempfile.TemporaryDirectory(prefix="streamcert-chromium-") as profile:
        done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--no-first-run", "--enable-logging=stderr", "--v=0", f"--user-data-dir={profile}",
                               f"--window-size={width},{height}", f"--screenshot={png}",
                               Path(page).resolve().as_uri()],
                              capture_output=True, text=True, timeout=timeout_s)
    if not png.is_file():
        raise PrerequisiteMissing(f"Chromium drew no screenshot of {page} (exit code {done.returncode}).",
                                  hint="Run it by hand with the same flags to see why.",
                                  details=done.stderr[-2000:])
    return PageShot(png, [line for line in done.stderr.splitlines() if _CONSOLE.search(line)])
