"""``dpstream plan``: what a topology will release, at what error, memory and time.

:mod:`worker.plan.plan` assembles a plan (and is what the CLI and tests import) from
``build`` (the zero-noise probe of the mechanism), ``analysis`` (guarantee, sigma,
counter, timing, bounds, memory), ``whatif`` (knob variations, fix search),
``verdict`` and ``render`` (the text). Each module imports only those before it in
this list (``verdict`` also uses ``render``'s number formats).

May import: every layer below it (``config``, ``ingest``, ``release``, ``observe``,
``engine``). No Kafka client.
"""
