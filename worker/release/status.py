"""Is a release private? One answer for every reader (tail, dashboard, Python readers).

A release states the guarantee its noise has (SEMANTICS.md §12): a
release made with seeded (``fast``) or ``zero`` noise is not differentially
private and says so with ``"private": false``; the envelope may also name the
noise kind. A reader treats a release as **not private** when either says so:
``private`` is ``false``, or the noise kind (``noise_kind``, or ``noise`` as a
string or as an object with a ``kind``) is ``fast`` or ``zero``. An envelope
that states neither (written before these fields existed) is shown as it
claims, private, with its kind unknown.

>>> is_private({"private": False})
False
>>> is_private({"noise_kind": "zero"}), is_private({"noise": {"kind": "fast"}})
(False, False)
>>> is_private({"noise": "secure"}), is_private({})
(True, True)
>>> privacy_note({"private": False, "noise_kind": "zero"})
'NOT PRIVATE (zero noise)'
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

INSECURE_NOISE = ("fast", "zero")


def noise_kind(env: Mapping[str, Any]) -> str | None:
    """The noise kind an envelope states (``secure``/``fast``/``zero``), or None."""
    for name in ("noise_kind", "noise"):
        value = env.get(name)
        if isinstance(value, Mapping):
            value = value.get("kind")
        if isinstance(value, str):
            return value
    return None


def is_private(env: Mapping[str, Any]) -> bool:
    """False when the envelope says ``private: false`` or names fast/zero noise."""
    return env.get("private") is not False and noise_kind(env) not in INSECURE_NOISE


def privacy_note(env: Mapping[str, Any]) -> str:
    """``""`` for a private release, else a loud marker naming the noise kind."""
    if is_private(env):
        return ""
    why = env.get("not_private_reason")
    if isinstance(why, str) and why:
        return f"NOT PRIVATE ({why})"
    kind = noise_kind(env)
    return "NOT PRIVATE" + (f" ({kind} noise)" if kind else "")
