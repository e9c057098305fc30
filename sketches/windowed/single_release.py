"""The once-per-instance release guard shared by the noise-once sketches (paper 003).

A sketch whose noise is drawn once, at construction, may be published only
once: a second release after more updates reveals the exact increments (the
noise cancels in the difference). :class:`SingleRelease` holds the
``_released`` flag and the two refusals every such mechanism makes
(:mod:`sketches.windowed.linear.dp_linear`, :mod:`sketches.windowed.linear.dp_cms_hh`,
:mod:`sketches.windowed.linear.dyadic_quantiles`).

Examples
--------
>>> class Demo(SingleRelease):
...     def __init__(self) -> None:
...         self._released = False
>>> d = Demo()
>>> d._check_open()
>>> d._begin_release("release: this demo was already released")
>>> try:
...     d._check_open()
... except PrivacyError as exc:
...     print(str(exc)[:45])
update_batch: this window was already release
"""

from __future__ import annotations

from sketches.errors import PrivacyError

__all__ = ["SingleRelease"]


class SingleRelease:
    """Mixin: the ``_released`` flag and the refusals of a single-release window."""

    _released: bool

    def _check_open(self) -> None:
        """Refuse updates after the release (the next window needs fresh noise)."""
        if self._released:
            raise PrivacyError("update_batch: this window was already released; start a fresh "
                               "instance (fresh noise) for the next window")

    def _begin_release(self, refusal: str) -> None:
        """Mark the instance released, or raise ``refusal`` (plus why) if it already is."""
        if self._released:
            raise PrivacyError(refusal + "; a second release after more updates reveals the "
                               "exact increments")
        self._released = True
