"""Kafka: clients, admin, the checkpoint and release topics, the embedded broker.

The only layer below the runtime that talks to a broker: the embedded Tansu
broker for demos and tests (:mod:`~worker.kafka.embedded`), the topics a
worker declares and checks (:mod:`~worker.kafka.admin`), the engine's sink over
a producer (:mod:`~worker.kafka.sink`), broker-fault
watching (:mod:`~worker.kafka.broker_watch`), the input consumer's fast fetch
path (:mod:`~worker.kafka.record_tuples`), the release readers over Kafka
(:mod:`~worker.kafka.release_reader`, the reader API of
:mod:`worker.release.reader` on aiokafka and confluent-kafka), the dashboard's
topic follower (:mod:`~worker.kafka.release_follower`) and the demo producer.

May import: ``sketches``, every worker layer below (``config`` ... ``plan``) and
the Kafka client libraries.
"""
