"""``dpstream dashboard``: a live web page over the public release topics.

:mod:`worker.dashboard.state` is the pure model (releases in, a JSON view
out, staleness judged from the times it is given);
:mod:`worker.dashboard.health` its operator side (workers' status, the bounded
metrics history, the broker's status); :mod:`worker.dashboard.metrics_probe`
reads a worker's Prometheus endpoint (or a Prometheus server's answer);
:mod:`worker.dashboard.server` is the aiohttp server and the follower task
(the follower itself: :mod:`worker.kafka.release_follower`; the command line:
:mod:`worker.cli.dashboard`); :mod:`worker.dashboard.page` holds the page
(inline JS and SVG, no network access needed).

May import: ``sketches`` and every worker layer up to ``kafka`` (never ``runtime``
or ``cli``).
"""
