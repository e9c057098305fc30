"""Shard routing: which partition owns a shard, and grouping a batch by shard.

Rule (documented in docs/TOPOLOGY.md): producers use the shard key as the
Kafka message key, so the standard Kafka partitioner places every shard in
exactly one partition::

    partition = (murmur2(utf8(shard_key)) & 0x7fffffff) % partitions

(the Java client's and aiokafka's default). The worker keeps state per
``(topology, partition, shard)`` and only counts a shard on the partition this
rule assigns it to (counting it elsewhere would create a second, parallel state
for the same public release identity ``(topology, shard, epoch, seq)``). The
gate says ``wrong_partition`` for a shard of another partition: the engine
forwards such input records to that partition through the repartition topic
(:mod:`worker.ingest.repartition`); only a record already on the repartition
topic is dead-lettered with that reason.

Examples
--------
>>> partition_for("r1", 4)
0
>>> gate = ShardGate(partition=0, partitions=4, allowed=frozenset({"r1", "r3"}))
>>> gate("r1"), gate("r9"), gate("r3")
(None, 'unknown_shard', 'wrong_partition')
>>> import numpy as np
>>> [(s, i.tolist()) for s, i in group_by_shard(np.array(["b", "a", "b"], dtype=object))]
[('a', [1]), ('b', [0, 2])]
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import numpy as np

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2 of ``data`` as Kafka's Java client computes it (``Utils.murmur2``).

    The unsigned 32-bit hash the default partitioner takes modulo the partition
    count (after clearing the sign bit); equal to ``aiokafka.partitioner.murmur2``
    (tests/unit/worker/test_routing_murmur2.py checks it on random keys). Pure
    Python, so the ingest layer needs no Kafka client library: the 4-byte blocks
    are read little-endian in one ``struct`` call.

    >>> murmur2(b""), murmur2(b"r1"), murmur2("é".encode())
    (275646681, 2117483452, 186971271)
    """
    length = len(data)
    h = _SEED ^ length
    n4 = length // 4
    for k in struct.unpack_from(f"<{n4}I", data):
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    tail = data[n4 * 4:]
    if tail:
        if len(tail) >= 3:
            h ^= tail[2] << 16
        if len(tail) >= 2:
            h ^= tail[1] << 8
        h = ((h ^ tail[0]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    return h ^ (h >> 15)


def partition_for(shard: str, partitions: int) -> int:
    """The partition the default Kafka partitioner gives message key ``shard``."""
    return int((murmur2(shard.encode("utf-8")) & 0x7FFFFFFF) % partitions)


class ShardBudget:
    """The most shards of one open-set topology a worker holds (``DPSTREAM_MAX_OPEN_SHARDS``).

    Shared by the :class:`ShardGate` of every partition of the topology on this worker:
    ``held`` counts the shards they admitted (restored ones included, even beyond
    ``limit``: dropping a restored state would lose its privacy accounting). ``limit`` 0
    (the default): no limit.

    Examples
    --------
    >>> b = ShardBudget(1)
    >>> b.take(), b.take(), b.held
    (True, False, 1)
    """

    def __init__(self, limit: int) -> None:
        self.limit, self.held = int(limit), 0

    def take(self) -> bool:
        """Count one more shard if the limit allows it."""
        if 0 < self.limit <= self.held:
            return False
        self.held += 1
        return True

    def force(self) -> None:
        """Count one more shard whatever the limit (a restored state)."""
        self.held += 1

    def give_back(self, n: int) -> None:
        """``n`` shards are no longer held (their partition was revoked or reset)."""
        self.held = max(0, self.held - n)


class ShardGate:
    """Decide whether a shard key is accepted on ``partition`` (cached per key).

    Returns ``None`` when accepted, otherwise the dead-letter reason code. With a
    ``budget`` (an open shard set under ``DPSTREAM_MAX_OPEN_SHARDS``), a new shard is
    admitted while the budget has room and refused as ``shard_limit`` otherwise; a
    refusal is not cached, so the shard is admitted once room frees up (another
    partition revoked). An admitted shard stays admitted until :meth:`release`.
    """

    def __init__(self, partition: int, partitions: int,
                 allowed: frozenset[str] | None, budget: ShardBudget | None = None) -> None:
        self.partition, self.partitions, self.allowed = partition, partitions, allowed
        self.budget = budget if allowed is None else None  # a closed set is bounded already
        self._admitted: set[str] = set()
        self._cache: dict[str, str | None] = {}

    def __call__(self, shard: str) -> str | None:
        try:
            return self._cache[shard]
        except KeyError:
            pass
        if self.allowed is not None and shard not in self.allowed:
            verdict: str | None = "unknown_shard"
        elif partition_for(shard, self.partitions) != self.partition:
            verdict = "wrong_partition"
        else:
            verdict = None
        if verdict is None and self.budget is not None and shard not in self._admitted:
            if not self.budget.take():
                return "shard_limit"
            self._admitted.add(shard)
        if len(self._cache) < 100_000:
            self._cache[shard] = verdict
        return verdict

    def admit(self, shard: str) -> None:
        """Count a restored shard as held (whatever the budget's limit)."""
        if self.budget is not None and shard not in self._admitted:
            self.budget.force()
            self._admitted.add(shard)

    def release(self) -> None:
        """Give every admitted shard back to the budget (the partition is dropped)."""
        if self.budget is not None:
            self.budget.give_back(len(self._admitted))
        self._admitted.clear()
        self._cache.clear()


def group_by_shard(shards: np.ndarray) -> Iterator[tuple[str, np.ndarray]]:
    """Yield ``(shard, indices)`` in sorted shard order; indices keep arrival order."""
    if shards.shape[0] == 0:
        return
    first = shards[0]
    if np.all(shards == first):
        yield str(first), np.arange(shards.shape[0])
        return
    n = shards.shape[0]
    change = np.flatnonzero(shards[1:] != shards[:-1]) + 1
    if change.shape[0] * 8 < n:  # long runs (columnar/arrow: one shard per message)
        starts, ends = np.r_[0, change], np.r_[change, n]
        runs: dict[str, list[np.ndarray]] = {}
        for head, a, b in zip(shards[starts].tolist(), starts.tolist(), ends.tolist(),
                              strict=True):
            runs.setdefault(head, []).append(np.arange(a, b))
        for key in sorted(runs):
            yield str(key), np.concatenate(runs[key])
        return
    # Codes through a dict: exact string equality (a fixed-width numpy string dtype
    # drops trailing NULs) and much cheaper than sorting an object array.
    lst = shards.tolist()
    keys = sorted(set(lst))
    code = {k: i for i, k in enumerate(keys)}
    inverse = np.fromiter(map(code.__getitem__, lst), dtype=np.int64, count=len(lst))
    order = np.argsort(inverse, kind="stable")
    bounds = np.searchsorted(inverse[order], np.arange(len(keys) + 1))
    for k, key in enumerate(keys):
        yield str(key), order[bounds[k]:bounds[k + 1]]
