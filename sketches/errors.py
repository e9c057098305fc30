"""Errors raised by dpstream's sketches.

Hierarchy (catch the base class to handle every dpstream sketch error)::

    DPStreamError
    ├── SpecError              invalid parameters in a spec (names the field and the fix)
    ├── IncompatibleSpecError  merge/restore across specs that do not match
    ├── HorizonExceededError   an update past the horizon T fixed at construction
    ├── SerializationError     bytes that are not a valid dpstream state (magic, version, length)
    └── PrivacyError           a request that would weaken the privacy guarantee
                               (e.g. non-secure noise in production, arrival clock under add/remove)
"""

from __future__ import annotations


class DPStreamError(Exception):
    """Base class of every error raised by dpstream."""


class SpecError(DPStreamError, ValueError):
    """A spec parameter is invalid. The message names the field and how to fix it."""


class IncompatibleSpecError(DPStreamError, ValueError):
    """Two sketches (or a sketch and a serialized state) do not share a spec."""


class HorizonExceededError(DPStreamError):
    """An update would move the clock past the horizon fixed at construction."""


class SerializationError(DPStreamError, ValueError):
    """Serialized bytes are malformed, truncated or of an unknown format version."""


class PrivacyError(DPStreamError):
    """The requested configuration would silently weaken differential privacy."""
