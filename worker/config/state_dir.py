"""Where the worker keeps on-disk state: a per-user directory, never the working directory.

The worker's own state lives in Kafka (checkpoints); on disk there is only what
its libraries write: Faust's data directory (``dpstream run`` without
``--no-faust``) and numba's compiled-kernel cache. Both go under one state
directory, the first of these that is writable (created if missing):

1. ``$DPSTREAM_STATE_DIR`` (when set, it is the only candidate: a deployment that
   names a directory gets it or an error);
2. ``$XDG_STATE_HOME/dpstream``;
3. ``~/.local/state/dpstream`` (``$HOME``);
4. ``<temp dir>/dpstream-<uid>`` (``tempfile.gettempdir()``).

None writable: a one-line :class:`~sketches.errors.SpecError` naming what was
tried and the fix. A read-only working directory (a container's, ``/``) is fine.

>>> candidates({"DPSTREAM_STATE_DIR": "/srv/dp"}, tmp="/tmp")
[PosixPath('/srv/dp')]
>>> [str(p) for p in candidates({"HOME": "/home/ann"}, tmp="/tmp", uid=7)]
['/home/ann/.local/state/dpstream', '/tmp/dpstream-7']
>>> [str(p) for p in candidates({"XDG_STATE_HOME": "/x", "HOME": "/h"}, tmp="/t", uid=1)]
['/x/dpstream', '/h/.local/state/dpstream', '/t/dpstream-1']
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

ENV = "DPSTREAM_STATE_DIR"


def candidates(env: Mapping[str, str] | None = None, *, tmp: str | None = None,
               uid: int | None = None) -> list[Path]:
    """The state directories to try, in order (see the module docstring)."""
    env = os.environ if env is None else env
    if env.get(ENV, "").strip():
        return [Path(env[ENV].strip()).expanduser()]
    out = []
    if env.get("XDG_STATE_HOME", "").strip():
        out.append(Path(env["XDG_STATE_HOME"].strip()) / "dpstream")
    if env.get("HOME", "").strip():
        out.append(Path(env["HOME"].strip()) / ".local" / "state" / "dpstream")
    uid = os.getuid() if uid is None and os.name == "posix" else (uid or 0)
    out.append(Path(tmp if tmp is not None else tempfile.gettempdir()) / f"dpstream-{uid}")
    return out


def writable(path: Path) -> str | None:
    """None if ``path`` is (made) a directory a file can be written in, else why not."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".probe-"):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def state_dir(env: Mapping[str, str] | None = None, *, tmp: str | None = None) -> Path:
    """The first writable candidate (created), else a one-line SpecError."""
    from sketches.errors import SpecError  # here: importing this module must not import
    # sketches (numba), see default_numba_cache
    tried = []
    for path in candidates(env, tmp=tmp):
        why = writable(path)
        if why is None:
            return path.resolve()
        tried.append(f"{path} ({why})")
    raise SpecError(f"no writable state directory (tried {', '.join(tried)}); set "
                    f"{ENV} to a directory this user can write (Faust's data directory "
                    "and numba's cache go there), or run with --no-faust")


def default_numba_cache(env: Mapping[str, str] | None = None) -> str:
    """Where numba's cache goes by default: ``<first candidate>/numba`` (not created
    here; numba falls back to its own locations if it cannot write there).

    :mod:`worker.cli` sets ``NUMBA_CACHE_DIR`` to it before numba is imported (numba
    reads the variable once, at import), so this module imports nothing of ``sketches``
    at module level."""
    return str(candidates(env)[0] / "numba")
