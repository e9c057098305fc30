"""``dpstream dashboard``: a live web page over the public release topics.

:mod:`worker.dashboard.state` is the pure model (releases in, a JSON view
out); :mod:`worker.dashboard.metrics_probe` reads the worker's Prometheus
endpoint; :mod:`worker.dashboard.server` is the aiohttp server and the
follower task (the follower itself: :mod:`worker.kafka.release_follower`; the
command line: :mod:`worker.cli.dashboard`); :mod:`worker.dashboard.page` holds
the page (inline JS and SVG, no network access needed).

May import: ``sketches`` and every worker layer up to ``kafka`` (never ``runtime``
or ``cli``).
"""
