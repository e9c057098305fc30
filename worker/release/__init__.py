"""Releases: the envelope a release is published in, and reading it back.

:mod:`~worker.release.envelope` builds an envelope, :mod:`~worker.release.status`
judges whether it is private, :mod:`~worker.release.epoch_params` keeps the
parameters an epoch's noise was drawn with, :mod:`~worker.release.reader` parses
and indexes published envelopes.

May import: ``sketches`` and ``worker.config``. No Kafka client.
"""
