"""Releases: the envelope a release is published in, and reading it back.

:mod:`~worker.release.envelope` is the envelope (build, parse, judge whether a
release is private; the schema version and the record key),
:mod:`~worker.release.epoch_params` keeps the parameters an epoch's noise was
drawn with, :mod:`~worker.release.reader` is the reader API
(:class:`~worker.release.reader.ReleaseView`) and its pure index; the readers
over Kafka are in :mod:`worker.kafka.release_reader`.

May import: ``sketches`` and ``worker.config``. No Kafka client.
"""
