"""Typed worker settings read from the environment.

One :class:`Settings` object carries everything the worker needs that is not
part of a topology: where the broker is, how to authenticate, the consumer
group, the checkpoint topic and the metrics endpoint. Every field has an
environment variable ``DPSTREAM_<FIELD>`` (upper case).

With no broker configured (``DPSTREAM_BROKER`` empty) the CLI starts the
embedded broker on loopback and fills :attr:`Settings.broker` in.

Examples
--------
>>> s = Settings.from_env({"DPSTREAM_BROKER": "kafka-1:9092", "DPSTREAM_METRICS_PORT": "0"})
>>> s.broker, s.metrics_port, s.metrics_host
('kafka-1:9092', 0, '127.0.0.1')
>>> s.kafka_security_kwargs()
{'security_protocol': 'PLAINTEXT'}
>>> Settings.from_env({"DPSTREAM_SESSION_TIMEOUT_MS": "soon"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketches.errors.SpecError: DPSTREAM_SESSION_TIMEOUT_MS: expected an integer, got 'soon'; ...
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sketches.errors import SpecError

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_ASSIGNMENTS = ("group", "static")


@dataclass(frozen=True)
class Settings:
    """Worker settings (environment variable ``DPSTREAM_<NAME>`` for each field).

    Attributes
    ----------
    broker
        Kafka bootstrap servers ``host:port[,host:port]``; empty starts the
        embedded broker (CLI only) if :attr:`embedded_broker` allows it.
    embedded_broker
        Whether ``dpstream run`` may start the embedded broker when no broker
        is configured (the container image sets it false: a missing
        ``DPSTREAM_BROKER`` is then an error, not a private in-memory broker).
    topologies
        Topology files or directories (``os.pathsep``-separated in the env).
    group_id
        Consumer group shared by all workers of one deployment.
    deployment_id
        This deployment's identity (default: :attr:`group_id`), written into every
        checkpoint and ownership claim; a worker refuses to restore a checkpoint of
        another deployment (two deployments would publish the same releases with two
        noise draws: docs/PRIVACY.md "One writer per release").
    takeover_from
        Deployment ids (comma-separated) whose checkpoints this deployment may restore:
        a blue/green switch; this deployment's claims then fence the named one
        (docs/OPERATIONS.md "Blue/green").
    assignment
        ``group`` (default: workers split partitions through the consumer
        group) or ``static`` (one worker owns every partition; no group join,
        fastest restart).
    checkpoint_topic
        Compacted topic holding per-(topology, partition) checkpoints.
    metrics_host, metrics_port
        Prometheus endpoint; bound to loopback by default; port 0 disables it.
    max_batch
        Maximum records fetched per partition per poll.
    session_timeout_ms, heartbeat_interval_ms
        Consumer group timers (short defaults suit the embedded broker).
    security_protocol, sasl_mechanism, sasl_username, sasl_password,
    ssl_cafile, ssl_certfile, ssl_keyfile
        Passed through to the Kafka clients for real clusters.
    plugins
        Extra Python modules imported at start-up (they may register mechanisms).
    crash_points
        Testing only: ``point:probability`` pairs at which the worker kills
        itself with SIGKILL (crash-consistency tests); empty in production.
    log_level
        Python logging level name (``--log-level`` on every command overrides it).
    log_format
        ``text`` (default) or ``json`` (one JSON object per line: time, level, logger,
        message, topology/shard/partition where they apply): one format for every
        logger of the process (dpstream's, aiokafka's, Faust's), see
        :mod:`worker.observe.logs`.
    state_dir
        Directory for on-disk state (Faust's data directory, numba's cache); empty:
        ``$XDG_STATE_HOME/dpstream``, else ``~/.local/state/dpstream``, else a
        temporary directory (:mod:`worker.config.state_dir`). Never the working
        directory.
    producer_max_request_bytes
        The producer's ``max_request_size`` (default 4 MiB); keep it at most the
        broker's ``message.max.bytes``. Dead-letter copies are truncated to fit it.
    poison_attempts
        A record that makes the worker raise this many times is dead-lettered by
        offset (reason ``poison``) and skipped (:mod:`worker.runtime.poison`).
    broker_outage_limit_s
        Stop with a clear error after the broker was unreachable this long
        (seconds; 0 waits forever). Readiness is false during an outage.
    log_interval_s
        Kafka client log lines: at most one per cause per this many seconds,
        with a count of the suppressed ones.
    memory_limit_bytes
        Refuse at start-up a topology set whose worst-case shard state exceeds this
        (bytes; 0 = no limit): :mod:`worker.engine.memory_model`, docs/OPERATIONS.md.
    max_open_shards
        The most shards of one open-set topology (no ``shards.allowed``) a worker
        holds (0: no limit); records of further new shards are dead-lettered
        ``shard_limit`` (:class:`worker.ingest.routing.ShardBudget`). Required with a memory
        limit when an open-set topology runs.
    """

    broker: str = ""
    embedded_broker: bool = True
    topologies: tuple[str, ...] = ("topologies",)
    group_id: str = "dpstream"
    deployment_id: str = ""
    takeover_from: tuple[str, ...] = ()
    assignment: str = "group"
    checkpoint_topic: str = "dpstream-checkpoints"
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 9108
    max_batch: int = 50_000
    session_timeout_ms: int = 6000
    heartbeat_interval_ms: int = 1000
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = ""
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)
    ssl_cafile: str = ""
    ssl_certfile: str = ""
    ssl_keyfile: str = ""
    plugins: tuple[str, ...] = ()
    crash_points: str = ""
    log_level: str = "INFO"
    log_format: str = "text"
    state_dir: str = ""
    producer_max_request_bytes: int = 4 * 1024 * 1024
    poison_attempts: int = 3
    broker_outage_limit_s: int = 300
    log_interval_s: int = 30
    memory_limit_bytes: int = 0
    max_open_shards: int = 0

    def __post_init__(self) -> None:
        if self.security_protocol not in _PROTOCOLS:
            raise SpecError(
                f"DPSTREAM_SECURITY_PROTOCOL: unknown protocol {self.security_protocol!r}; "
                f"use one of {', '.join(_PROTOCOLS)}"
            )
        if self.assignment not in _ASSIGNMENTS:
            raise SpecError(
                f"DPSTREAM_ASSIGNMENT: unknown mode {self.assignment!r}; use 'group' or 'static'"
            )
        if self.log_format.lower() not in ("text", "json"):
            raise SpecError(f"DPSTREAM_LOG_FORMAT: unknown format {self.log_format!r}; use "
                            "text or json")
        if not 0 <= self.metrics_port <= 65535:
            raise SpecError("DPSTREAM_METRICS_PORT: must be in 0..65535 (0 disables metrics)")
        if self.max_batch < 1:
            raise SpecError("DPSTREAM_MAX_BATCH: must be >= 1")
        if self.producer_max_request_bytes < 65_536:
            raise SpecError("DPSTREAM_PRODUCER_MAX_REQUEST_BYTES: must be >= 65536 (bytes; "
                            "at most the broker's message.max.bytes)")
        if self.poison_attempts < 1:
            raise SpecError("DPSTREAM_POISON_ATTEMPTS: must be >= 1")
        if self.broker_outage_limit_s < 0 or self.log_interval_s < 0:
            raise SpecError("DPSTREAM_BROKER_OUTAGE_LIMIT_S and DPSTREAM_LOG_INTERVAL_S: must "
                            "be >= 0 seconds")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise SpecError(
                "DPSTREAM_HEARTBEAT_INTERVAL_MS: must be smaller than DPSTREAM_SESSION_TIMEOUT_MS "
                "(e.g. 1000 and 6000)"
            )

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Build settings from ``environ`` (default ``os.environ``); unknown keys are ignored."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in fields(cls):
            key = f"DPSTREAM_{f.name.upper()}"
            if key not in env:
                continue
            raw = env[key].strip()
            default = f.default
            if isinstance(default, bool):
                values[f.name] = raw.lower() in ("1", "true", "yes", "on")
            elif isinstance(default, int):
                try:
                    values[f.name] = int(raw)
                except ValueError:
                    raise SpecError(
                        f"{key}: expected an integer, got {raw!r}; "
                        f"set it to a whole number such as {default}"
                    ) from None
            elif isinstance(default, tuple):
                sep = "," if f.name in ("plugins", "takeover_from") else os.pathsep
                parts = raw.split(sep)
                if f.name == "takeover_from":  # ids: "blue, green" means blue and green
                    parts = [p.strip() for p in parts]
                values[f.name] = tuple(p for p in parts if p)
            else:
                values[f.name] = raw
        return cls(**values)

    @property
    def deployment(self) -> str:
        """The deployment id: :attr:`deployment_id`, else :attr:`group_id`.

        >>> Settings(group_id="blue").deployment, Settings(deployment_id="x").deployment
        ('blue', 'x')
        """
        return self.deployment_id or self.group_id

    def with_broker(self, broker: str) -> Settings:
        """A copy pointing at ``broker``."""
        return replace(self, broker=broker)

    def kafka_security_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for aiokafka clients (security protocol, SASL, TLS)."""
        kw: dict[str, Any] = {"security_protocol": self.security_protocol}
        if self.security_protocol.startswith("SASL"):
            kw["sasl_mechanism"] = self.sasl_mechanism or "PLAIN"
            kw["sasl_plain_username"] = self.sasl_username
            kw["sasl_plain_password"] = self.sasl_password
        if self.security_protocol.endswith("SSL"):
            ctx = ssl.create_default_context(cafile=self.ssl_cafile or None)
            if self.ssl_certfile:
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile or None)
            kw["ssl_context"] = ctx
        return kw

    def crash_probabilities(self) -> dict[str, float]:
        """Parse :attr:`crash_points` (testing only) into ``{point: probability}``."""
        out: dict[str, float] = {}
        for part in self.crash_points.split(","):
            if not part.strip():
                continue
            name, _, prob = part.partition(":")
            try:
                out[name.strip()] = float(prob) if prob else 1.0
            except ValueError:
                raise SpecError(
                    f"DPSTREAM_CRASH_POINTS: bad entry {part!r}; use point:probability"
                ) from None
        return out
