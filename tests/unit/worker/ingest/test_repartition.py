"""The repartition frame and the dedup rule (worker/ingest/repartition.py), pure."""

from __future__ import annotations

import random

from worker.ingest.repartition import (
    KIND_EVENT,
    KIND_MARK,
    VERSION,
    Inbox,
    frame,
    mark_frame,
    unframe,
)


def test_frame_round_trip_keeps_source_and_value() -> None:
    for value in (b"", b"{}", bytes(range(256)) * 3, None):
        f = unframe(frame("topo/\u00e9", 7, 2**40, 1_700_000_000_123, 1, value))
        assert f is not None and f.kind == KIND_EVENT
        assert (f.topology, f.partition, f.offset, f.timestamp, f.timestamp_type, f.value) \
            == ("topo/\u00e9", 7, 2**40, 1_700_000_000_123, 1, value)
    m = unframe(mark_frame("t", 3, 123_456))
    assert m is not None and (m.kind, m.partition, m.timestamp) == (KIND_MARK, 3, 123_456)


def test_unframe_refuses_what_is_not_a_frame() -> None:
    good = frame("t", 0, 1, 2, 0, b"x")
    assert unframe(good) is not None
    for raw in (None, b"", b'{"router": "r1"}', good[:10], b"XXXX" + good[4:],
                good[:4] + bytes([VERSION + 1]) + good[5:],
                frame("a-long-topology-name", 0, 1, 2, 0, None)[:30]):
        assert unframe(raw) is None, raw


def test_dedup_skips_copies_per_source_partition() -> None:
    inbox = Inbox()
    got = [inbox.accept(r, q, o) for r, (q, o) in enumerate(
        [(1, 5), (2, 5), (1, 6), (1, 5), (2, 4), (2, 9), (1, 6), (1, 7)])]
    assert got == [True, True, True, False, False, True, False, True]
    assert inbox.seen == {1: 7, 2: 9}


def test_checkpoint_keeps_only_what_was_read_below_the_resume_offset() -> None:
    inbox = Inbox()
    for r, (q, o) in enumerate([(1, 5), (2, 5), (1, 6), (2, 8)]):
        assert inbox.accept(r, q, o)
    assert inbox.checkpoint_seen(resume=2) == {1: 5, 2: 5}
    assert inbox.checkpoint_seen(resume=4) == {1: 6, 2: 8}
    restored = Inbox({1: 6, 2: 8}, next_offset=4)
    assert not restored.accept(4, 1, 6) and restored.accept(5, 1, 7)


def test_crash_anywhere_counts_every_forwarded_event_once() -> None:
    """Simulated forwarder and receiver, each crashing at random between forward (or
    apply) and checkpoint: the receiver's counted source offsets are each source
    record exactly once. The forwarder sends in source-offset order and flushes before
    its checkpoint; the receiver checkpoints its inbox with its state."""
    rng = random.Random(3)
    for _ in range(200):
        source = list(range(rng.randrange(1, 40)))       # source offsets to forward (q=1)
        log: list[tuple[int, int]] = []                  # repartition topic: (q, o)
        fwd_ck = 0                                       # forwarder's checkpointed offset
        counted: list[int] = []                          # receiver state
        ck_state: tuple[list[int], dict[int, int], int] = ([], {}, 0)
        inbox, r_next = Inbox(), 0
        for _round in range(60):
            if fwd_ck < len(source):                     # forward a few, maybe checkpoint
                n = rng.randrange(1, 6)
                pos = fwd_ck
                for o in source[fwd_ck:fwd_ck + n]:
                    log.append((1, o))
                    pos = o + 1
                if rng.random() < 0.6:
                    fwd_ck = pos                         # flushed, then checkpointed
                # else: crash before the checkpoint: re-forwarded next round
            while r_next < len(log) and rng.random() < 0.8:
                q, o = log[r_next]
                if inbox.accept(r_next, q, o):
                    counted.append(o)
                r_next += 1
            if rng.random() < 0.5:                       # receiver checkpoints
                ck_state = (list(counted), inbox.checkpoint_seen(r_next), r_next)
            elif rng.random() < 0.3:                     # receiver crashes: restore
                counted = list(ck_state[0])
                inbox, r_next = Inbox(ck_state[1], ck_state[2]), ck_state[2]
        while fwd_ck < len(source):
            for o in source[fwd_ck:]:
                log.append((1, o))
            fwd_ck = len(source)
        while r_next < len(log):
            q, o = log[r_next]
            if inbox.accept(r_next, q, o):
                counted.append(o)
            r_next += 1
        assert counted == source


def test_marks_floor_waits_for_every_other_partition() -> None:
    inbox = Inbox()
    assert inbox.marks_floor(0, 3) is None
    inbox.mark(1, 500)
    assert inbox.marks_floor(0, 3) is None
    inbox.mark(2, 300)
    inbox.mark(2, 200)  # never back
    assert inbox.marks_floor(0, 3) == 300
    assert Inbox().marks_floor(0, 1) is not None  # one partition: nothing to wait for


def test_a_forward_after_a_lost_one_is_skipped_until_the_sender_starts_again() -> None:
    """Sender forwards 5, 6 (lost: delivery failed), 7 (delivered, prev 6): 7 is not
    taken, so the sender's restart (new chain) re-forwards 6 and 7 and both count."""
    inbox = Inbox()
    assert inbox.accept(0, 1, 5, prev=-1)
    assert not inbox.accept(1, 1, 7, prev=6)          # 6 never arrived
    assert not inbox.accept(2, 1, 8, prev=7)          # the chain stays broken
    assert inbox.accept(3, 1, 6, prev=-1)             # restarted sender: new chain
    assert inbox.accept(4, 1, 7, prev=6) and inbox.accept(5, 1, 8, prev=7)
    assert not inbox.accept(6, 1, 7, prev=-1)         # a copy
    f = unframe(frame("t", 1, 8, 0, 0, b"v", prev=7))
    assert f is not None and f.prev == 7
