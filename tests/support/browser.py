"""Headless Chromium for the dashboard tests (Debian's chromium; .ci/run installs it)."""

from __future__ import annotations

import shutil
import subprocess
import tempfile

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def chromium(*args: str, timeout: float = 90) -> subprocess.CompletedProcess[bytes]:
    assert CHROMIUM is not None
    profile = tempfile.mkdtemp(prefix="dpstream-chromium-")
    try:
        return subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={profile}", *args],
            capture_output=True, timeout=timeout, check=False)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
