"""The state directory (issue 23): per user, never the working directory, a one-line
error when nothing is writable; numba's cache goes there too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sketches.errors import SpecError
from worker.config.state_dir import state_dir

ROOT = Path(__file__).resolve().parents[4]
UNWRITABLE = "/proc/no-such-dir"  # not even root can create it


def test_explicit_dir_wins_and_is_created(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    env = {"DPSTREAM_STATE_DIR": str(target), "XDG_STATE_HOME": str(tmp_path / "x")}
    assert state_dir(env, tmp=str(tmp_path)) == target.resolve()
    assert target.is_dir() and not (tmp_path / "x").exists()


def test_falls_back_xdg_home_temp(tmp_path: Path) -> None:
    xdg, home, tmp = tmp_path / "xdg", tmp_path / "home", tmp_path / "tmp"
    assert state_dir({"XDG_STATE_HOME": str(xdg), "HOME": str(home)}, tmp=str(tmp)) \
        == (xdg / "dpstream").resolve()
    assert state_dir({"XDG_STATE_HOME": UNWRITABLE, "HOME": str(home)}, tmp=str(tmp)) \
        == (home / ".local/state/dpstream").resolve()
    got = state_dir({"XDG_STATE_HOME": UNWRITABLE, "HOME": UNWRITABLE}, tmp=str(tmp))
    assert got.parent == tmp.resolve() and got.name.startswith("dpstream-")


def test_nothing_writable_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        state_dir({"HOME": UNWRITABLE}, tmp=UNWRITABLE)
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("no writable state directory (tried ")
    assert "DPSTREAM_STATE_DIR" in msg and "--no-faust" in msg
    with pytest.raises(SpecError, match=f"tried {UNWRITABLE}/x "):
        state_dir({"DPSTREAM_STATE_DIR": f"{UNWRITABLE}/x", "HOME": str(tmp_path)})


def test_never_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    got = state_dir({"HOME": UNWRITABLE}, tmp=str(tmp_path / "t"))
    assert got != tmp_path.resolve() and tmp_path.resolve() / "t" in got.parents


def test_numba_cache_goes_to_the_state_dir(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(PYTHONPATH=str(ROOT), DPSTREAM_STATE_DIR=str(tmp_path))
    out = subprocess.run([sys.executable, "-c", "import worker.cli.main, numba; "
                          "print(numba.config.CACHE_DIR)"], env=env, capture_output=True,
                         text=True, check=True, cwd=tmp_path).stdout.strip()
    assert out == str(tmp_path / "numba")
