"""Versioned binary container for sketch state (never pickle).

Byte format, version 1 (all integers little-endian)::

    offset  size  field
    0       4     magic  b"DPSK"
    4       2     format version, uint16 (= 1)
    6       4     header length H, uint32
    10      H     header: UTF-8 JSON object (see below)
    10+H    ...   array data: the arrays listed in the header, in order,
                  each as raw little-endian C-order bytes, back to back

Header keys:

- ``mechanism`` (str): registry name, e.g. ``"lazy_cms"``.
- ``spec`` (object): every spec field, JSON-encoded.
- ``state`` (object): scalar state (clock position, rounds, calibration ...).
- ``arrays`` (list): ``{"name", "dtype", "shape", "nbytes"}`` per array;
  ``dtype`` is a numpy little-endian type string (``"<i8"``, ``"<f8"``).
- ``crc32`` (int): zlib CRC-32 of the array data section.
- ``hash_algorithm`` (str): :data:`sketches.core.hashing.HASH_ALGORITHM` of the
  build that wrote the state; a state written with another item hash (older
  checkpoints have none: ``dpstream-fmix64-v1``) is refused, because
  continuing it would put the same item in other cells mid-epoch.

:func:`unpack` validates magic, version, header length, JSON, total length
and the CRC, raising :class:`~sketches.errors.SerializationError`; it never
executes code from the input. Sketch classes check that the mechanism and the
spec match what they expect (:class:`~sketches.errors.IncompatibleSpecError`).

State bytes hold exact private counts: they are checkpoints (operator-only),
never releases.

Examples
--------
>>> import numpy as np
>>> blob = pack("demo", {"width": 2}, {"t": 3}, {"a": np.arange(4, dtype=np.int64)})
>>> blob[:4]
b'DPSK'
>>> header, arrays = unpack(blob)
>>> header["mechanism"], header["state"]["t"], arrays["a"].tolist()
('demo', 3, [0, 1, 2, 3])
>>> unpack(blob[:-1])  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketches.errors.SerializationError: state: truncated or padded data (expected 32 bytes ...
"""

from __future__ import annotations

import dataclasses
import json
import struct
import zlib
from collections.abc import Mapping
from typing import Any, TypeVar

import numpy as np

from sketches.core.hashing import HASH_ALGORITHM
from sketches.errors import IncompatibleSpecError, SerializationError, SpecError

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "check_header",
    "pack",
    "spec_from_params",
    "spec_to_dict",
    "state_from_bytes",
    "state_to_bytes",
    "unpack",
]

_S = TypeVar("_S")

MAGIC = b"DPSK"
FORMAT_VERSION = 1
_PREFIX = struct.Struct("<4sHI")
_ALLOWED_DTYPES = {"<i8", "<f8", "<u8", "<i4", "<u4", "|i1", "|u1", "<f4", "|b1"}


def pack(
    mechanism: str,
    spec: Mapping[str, Any],
    state: Mapping[str, Any],
    arrays: Mapping[str, np.ndarray],
) -> bytes:
    """Serialize a mechanism's spec, scalar state and numpy arrays.

    Parameters
    ----------
    mechanism : str
        Registry name of the mechanism.
    spec : mapping
        JSON-able spec fields.
    state : mapping
        JSON-able scalars (clock position, calibration, ...).
    arrays : mapping of str to numpy.ndarray
        Numeric arrays; stored little-endian, C order.

    Returns
    -------
    bytes
    """
    metas = []
    chunks = []
    for name, arr in arrays.items():
        a = np.ascontiguousarray(arr)
        a = a.astype(a.dtype.newbyteorder("<"), copy=False)
        dt = a.dtype.str
        if dt not in _ALLOWED_DTYPES:
            raise SerializationError(f"arrays.{name}: dtype {dt} cannot be serialized")
        raw = a.tobytes(order="C")
        metas.append({"name": name, "dtype": dt, "shape": list(a.shape), "nbytes": len(raw)})
        chunks.append(raw)
    body = b"".join(chunks)
    header = {
        "mechanism": mechanism,
        "spec": dict(spec),
        "state": dict(state),
        "arrays": metas,
        "crc32": zlib.crc32(body),
        "hash_algorithm": HASH_ALGORITHM,
    }
    hjson = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    return _PREFIX.pack(MAGIC, FORMAT_VERSION, len(hjson)) + hjson + body


def unpack(data: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Parse bytes written by :func:`pack`; returns ``(header, arrays)``.

    Raises
    ------
    SerializationError
        Bad magic, unknown version, truncated data, malformed header, CRC mismatch.
    """
    if not isinstance(data, bytes | bytearray | memoryview):
        raise SerializationError(f"state: expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < _PREFIX.size:
        raise SerializationError(
            f"state: {len(data)} bytes is shorter than the {_PREFIX.size}-byte preamble;"
            " the bytes are not a dpstream state"
        )
    magic, version, hlen = _PREFIX.unpack_from(data, 0)
    if magic != MAGIC:
        raise SerializationError(f"state: bad magic {magic!r} (expected {MAGIC!r})")
    if version != FORMAT_VERSION:
        raise SerializationError(
            f"state: format version {version} is not supported (this build reads"
            f" {FORMAT_VERSION}); restore with a matching dpstream version"
        )
    start = _PREFIX.size
    if start + hlen > len(data):
        raise SerializationError("state: header length exceeds the data; the bytes are truncated")
    try:
        header = json.loads(data[start : start + hlen].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise SerializationError(f"state: header is not valid JSON ({exc})") from None
    if not isinstance(header, dict) or not isinstance(header.get("arrays"), list):
        raise SerializationError("state: header must be an object with an 'arrays' list")
    body = data[start + hlen :]
    try:
        expected = sum(int(m["nbytes"]) for m in header["arrays"])
    except (KeyError, TypeError, ValueError):
        raise SerializationError("state: malformed array metadata in header") from None
    if expected != len(body):
        raise SerializationError(
            f"state: truncated or padded data (expected {expected} bytes of arrays, got"
            f" {len(body)}); the bytes are not a complete dpstream state"
        )
    if zlib.crc32(body) != header.get("crc32"):
        raise SerializationError("state: CRC-32 mismatch; the state bytes are corrupt")
    if header.get("hash_algorithm") != HASH_ALGORITHM:
        raise SerializationError(
            f"state.hash_algorithm: state was written with item hash"
            f" {header.get('hash_algorithm', 'dpstream-fmix64-v1')!r} but this build hashes with"
            f" {HASH_ALGORITHM!r}; items would land in other cells: start a new epoch"
        )
    arrays: dict[str, np.ndarray] = {}
    offset = 0
    for meta in header["arrays"]:
        try:
            name, dt, shape, nbytes = (
                str(meta["name"]), str(meta["dtype"]), tuple(int(s) for s in meta["shape"]),
                int(meta["nbytes"]),
            )
        except (KeyError, TypeError, ValueError):
            raise SerializationError("state: malformed array metadata in header") from None
        if dt not in _ALLOWED_DTYPES:
            raise SerializationError(f"arrays.{name}: dtype {dt} is not allowed")
        dtype = np.dtype(dt)
        if any(s < 0 for s in shape) or int(np.prod(shape)) * dtype.itemsize != nbytes:
            raise SerializationError(f"arrays.{name}: shape {shape} does not match {nbytes} bytes")
        arr = np.frombuffer(body, dtype=dtype, count=int(np.prod(shape)), offset=offset)
        arrays[name] = arr.reshape(shape).astype(dtype.newbyteorder("="), copy=True)
        offset += nbytes
    return header, arrays


def check_header(
    header: Mapping[str, Any], mechanism: str, spec: Mapping[str, Any] | None
) -> None:
    """Refuse a state written by another mechanism or with a different spec.

    Raises
    ------
    IncompatibleSpecError
        Mechanism name differs, or ``spec`` is given and differs from the stored spec.
    """
    if header.get("mechanism") != mechanism:
        raise IncompatibleSpecError(
            f"mechanism: state was written by {header.get('mechanism')!r}, not {mechanism!r};"
            " restore it with the matching class"
        )
    if spec is not None:
        stored = header.get("spec", {})
        expected = json.loads(json.dumps(dict(spec)))
        diff = sorted(k for k in set(stored) | set(expected) if stored.get(k) != expected.get(k))
        if diff:
            raise IncompatibleSpecError(
                f"spec: stored state differs in {', '.join(diff)}; restore with the spec the"
                " state was written with, or start a new epoch"
            )


# ---------------------------------------------------------------------------
# Helpers shared by the sketch classes (spec <-> dict, state <-> bytes)
# ---------------------------------------------------------------------------
def spec_from_params(spec_cls: type[_S], params: Mapping[str, Any]) -> _S:
    """Build a frozen spec dataclass from a params mapping (topology YAML).

    Unknown keys and missing required fields raise
    :class:`~sketches.errors.SpecError` naming the field; values are validated
    by the spec itself.

    Examples
    --------
    >>> from sketches.core.hashing import HashSpec
    >>> spec_from_params(HashSpec, {"seed": 1, "depth": 2, "width": 8}).width
    8
    >>> spec_from_params(HashSpec, {"seed": 1, "depth": 2, "widht": 8})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    sketches.errors.SpecError: widht: unknown parameter for HashSpec; known parameters: ...
    """
    known = {f.name: f for f in dataclasses.fields(spec_cls) if f.init}  # type: ignore[arg-type]
    unknown = sorted(set(params) - set(known))
    if unknown:
        raise SpecError(
            f"{unknown[0]}: unknown parameter for {spec_cls.__name__}; known parameters:"
            f" {', '.join(sorted(known))}"
        )
    missing = [
        name for name, f in known.items()
        if name not in params
        and f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
    ]
    if missing:
        raise SpecError(f"{missing[0]}: required parameter of {spec_cls.__name__} is missing")
    try:
        return spec_cls(**dict(params))
    except TypeError as exc:
        raise SpecError(f"params: invalid parameters for {spec_cls.__name__} ({exc})") from None


def spec_to_dict(spec: Any) -> dict[str, Any]:
    """JSON-able dict of every init field of a spec dataclass (enums as values).

    A field declared with ``metadata={"omit_if_default": True}`` is left out while
    it holds its default, so adding such a field keeps older specs' bytes (and
    checkpoints, release hashes) unchanged.
    """
    out: dict[str, Any] = {}
    for f in dataclasses.fields(spec):
        if not f.init:
            continue
        v = getattr(spec, f.name)
        if f.metadata.get("omit_if_default") and v == f.default:
            continue
        out[f.name] = v.value if hasattr(v, "value") else v
    return out


def state_to_bytes(
    mechanism: str, spec: Any, state: Mapping[str, Any], arrays: Mapping[str, np.ndarray]
) -> bytes:
    """:func:`pack` a sketch: its registry name, spec dataclass, scalars and arrays."""
    return pack(mechanism, spec_to_dict(spec), state, arrays)


def state_from_bytes(
    mechanism: str, spec_cls: type[_S], data: bytes, expected_spec: Any = None
) -> tuple[_S, dict[str, Any], dict[str, np.ndarray]]:
    """Unpack a sketch state, check mechanism and spec, rebuild the spec.

    Returns ``(spec, state scalars, arrays)``.
    """
    header, arrays = unpack(data)
    check_header(header, mechanism,
                 spec_to_dict(expected_spec) if expected_spec is not None else None)
    if not isinstance(header.get("spec"), dict) or not isinstance(header.get("state"), dict):
        raise SerializationError("state: header lacks 'spec' or 'state' objects")
    try:
        spec = spec_from_params(spec_cls, header["spec"])
    except SpecError as exc:
        raise SerializationError(f"state: stored spec is invalid ({exc})") from None
    return spec, header["state"], arrays
