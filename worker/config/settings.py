"""Typed worker settings read from the environment.

One :class:`Settings` object carries everything the worker needs that is not
part of a topology: where the broker is, how to authenticate, the consumer
group, the checkpoint topic and the metrics endpoint. Every field has an
environment variable ``DPSTREAM_<FIELD>`` (upper case).

With no broker configured (``DPSTREAM_BROKER`` empty) the CLI starts the
embedded broker on loopback and fills :attr:`Settings.broker` in.

:meth:`Settings.load` also reads a TOML settings file (``--config`` or
``DPSTREAM_CONFIG``): top-level keys are the field names, and the tables
``[kafka.aiokafka]`` / ``[kafka.librdkafka]`` are raw client properties passed
through to every client of that library (as are ``DPSTREAM_AIOKAFKA_<KWARG>`` and
``DPSTREAM_LIBRDKAFKA_<PROP>``, ``_`` read as ``.``). Precedence, highest
first: command-line flags, the environment, the file, the defaults. The Kafka
client arguments built from these settings are in
:mod:`worker.kafka.client_config` (docs/OPERATIONS.md "Kafka client configuration").

Examples
--------
>>> s = Settings.from_env({"DPSTREAM_BROKER": "kafka-1:9092", "DPSTREAM_METRICS_PORT": "0"})
>>> s.broker, s.metrics_port, s.metrics_host
('kafka-1:9092', 0, '127.0.0.1')
>>> s.kafka_security_kwargs()
{'security_protocol': 'PLAINTEXT'}
>>> s.isolation_level, s.client_id
('read_committed', 'dpstream-{role}')
>>> Settings.from_env({"DPSTREAM_SESSION_TIMEOUT_MS": "soon"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
sketches.errors.SpecError: DPSTREAM_SESSION_TIMEOUT_MS: expected an integer, got 'soon'; ...
"""

from __future__ import annotations

import difflib
import functools
import importlib
import logging
import os
import ssl
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import Any

from sketches.errors import SpecError

log = logging.getLogger(__name__)

_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_ASSIGNMENTS = ("group", "static")
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
_ISOLATION = ("read_committed", "read_uncommitted")

CONFIG_ENV = "DPSTREAM_CONFIG"
"""Path of the TOML settings file (``--config`` overrides it)."""

AIOKAFKA_PREFIX = "DPSTREAM_AIOKAFKA_"
"""``DPSTREAM_AIOKAFKA_<KWARG>``: a raw aiokafka keyword for every aiokafka client."""

LIBRDKAFKA_PREFIX = "DPSTREAM_LIBRDKAFKA_"
"""``DPSTREAM_LIBRDKAFKA_<PROP>``: a raw librdkafka property (``_`` read as ``.``)."""

OTHER_VARIABLES = frozenset({
    CONFIG_ENV,
    "DPSTREAM_BROKER_BIN",  # the embedded broker's binary (worker/kafka/embedded.py)
    "DPSTREAM_BOOTSTRAP",  # benchmarks and tests against a real cluster
    "DPSTREAM_UPDATE_SCREENSHOT", "DPSTREAM_UPDATE_RESULTS", "DPSTREAM_REGEN_GOLDEN",  # tests
})
"""``DPSTREAM_*`` variables that are not settings fields but are read elsewhere."""


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
    ssl_cafile, ssl_certfile, ssl_keyfile, ssl_key_password
        Passed to every Kafka client for real clusters. ``sasl_mechanism``:
        ``PLAIN`` (default), ``SCRAM-SHA-256``, ``SCRAM-SHA-512``, ``OAUTHBEARER``
        or ``GSSAPI``.
    sasl_oauth_token_provider
        ``module:function`` loaded at start-up for ``OAUTHBEARER``: called with no
        argument, it returns a token string or ``(token, expiry_unix_seconds)`` (or
        an awaitable of either, aiokafka clients only).
    sasl_kerberos_service_name, sasl_kerberos_domain_name
        ``GSSAPI``: the broker's Kerberos service name (default ``kafka``) and
        optional domain (aiokafka needs the ``gssapi`` package and a ticket).
    client_id
        ``client.id`` of every client; ``{role}`` is replaced by the client's
        role (``input``, ``producer``, ``checkpoint``, ``admin``, ...).
    group_instance_id
        ``group.instance.id`` of the input consumer (static membership; empty:
        dynamic). Unique per worker, e.g. the pod name.
    isolation_level
        ``read_committed`` (default: aborted and open transactions are not
        counted) or ``read_uncommitted``, for every input consumer.
    fetch_max_bytes, max_partition_fetch_bytes, request_timeout_ms,
    max_poll_interval_ms, rebalance_timeout_ms
        Fetch sizes and timeouts of the Kafka clients.
    aiokafka_config, librdkafka_config
        Raw client properties passed through (``[kafka.aiokafka]`` /
        ``[kafka.librdkafka]`` in the settings file, ``DPSTREAM_AIOKAFKA_*`` /
        ``DPSTREAM_LIBRDKAFKA_*`` in the environment); they override the typed
        settings, not what the worker fixes for correctness (group ids, commits).
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
    demo_input_mb
        ``dpstream demo`` only: the demo producer stops after writing this many MiB
        of (zstd-compressed) input to the embedded broker, which keeps every record
        in memory (0: no cap). Default 512: about 20 minutes of input at the default
        20,000 events/s (22 bytes per event), longer at a lower ``--rate``
        (docs/OPERATIONS.md "Demo memory").
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
    ssl_key_password: str = field(default="", repr=False)
    sasl_oauth_token_provider: str = ""
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str = ""
    client_id: str = "dpstream-{role}"
    group_instance_id: str = ""
    isolation_level: str = "read_committed"
    fetch_max_bytes: int = 50 * 1024 * 1024
    max_partition_fetch_bytes: int = 8 * 1024 * 1024
    request_timeout_ms: int = 40_000
    max_poll_interval_ms: int = 300_000
    rebalance_timeout_ms: int = 60_000
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
    demo_input_mb: int = 512
    aiokafka_config: Mapping[str, Any] = field(default_factory=dict, hash=False)
    librdkafka_config: Mapping[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.security_protocol not in _PROTOCOLS:
            raise SpecError(
                f"DPSTREAM_SECURITY_PROTOCOL: unknown protocol {self.security_protocol!r}; "
                f"use one of {', '.join(_PROTOCOLS)}"
            )
        if self.sasl_mechanism and self.sasl_mechanism not in _MECHANISMS:
            raise SpecError(
                f"DPSTREAM_SASL_MECHANISM: unknown mechanism {self.sasl_mechanism!r}; "
                f"use one of {', '.join(_MECHANISMS)}")
        if self.sasl_mechanism == "OAUTHBEARER" and ":" not in self.sasl_oauth_token_provider:
            raise SpecError("DPSTREAM_SASL_OAUTH_TOKEN_PROVIDER: OAUTHBEARER needs a token "
                            "provider 'module:function' (it returns the token)")
        if self.isolation_level not in _ISOLATION:
            raise SpecError(f"DPSTREAM_ISOLATION_LEVEL: unknown level {self.isolation_level!r};"
                            " use read_committed or read_uncommitted")
        for name, value in (("fetch_max_bytes", self.fetch_max_bytes),
                            ("max_partition_fetch_bytes", self.max_partition_fetch_bytes),
                            ("request_timeout_ms", self.request_timeout_ms),
                            ("max_poll_interval_ms", self.max_poll_interval_ms),
                            ("rebalance_timeout_ms", self.rebalance_timeout_ms)):
            if value < 1:
                raise SpecError(f"DPSTREAM_{name.upper()}: must be >= 1")
        if self.request_timeout_ms <= self.session_timeout_ms:
            raise SpecError("DPSTREAM_REQUEST_TIMEOUT_MS: must be larger than "
                            "DPSTREAM_SESSION_TIMEOUT_MS (e.g. 40000 and 6000)")
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
        if self.demo_input_mb < 0:
            raise SpecError("DPSTREAM_DEMO_INPUT_MB: must be >= 0 (MiB; 0 = no cap)")
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
        return cls(**_env_values(env))

    @classmethod
    def load(cls, environ: Mapping[str, str] | None = None, config: str | None = None,
             *, warn: bool = True) -> Settings:
        """Settings from the file ``config`` (default ``$DPSTREAM_CONFIG``, none if unset),
        overridden by the environment (default ``os.environ``).

        Command-line flags are applied by the caller on top (e.g. :meth:`with_broker`).
        With ``warn``, each unknown ``DPSTREAM_*`` variable is logged once (one WARNING
        line with a close match, :func:`unknown_variables`).

        Raises
        ------
        SpecError
            The file cannot be read, is not TOML, or has an unknown key or a bad value.
        """
        env = os.environ if environ is None else environ
        if warn:
            for line in unknown_variables(env):
                log.warning("%s", line)
        path = config or env.get(CONFIG_ENV, "").strip()
        values = _file_values(path) if path else {}
        from_env = _env_values(env)
        for name in ("aiokafka_config", "librdkafka_config"):
            if name in from_env:  # raw properties: the environment's win key by key
                from_env[name] = {**values.get(name, {}), **from_env[name]}
        return cls(**{**values, **from_env})

    def oauth_token_provider(self) -> Callable[[], Any]:
        """The ``module:function`` of :attr:`sasl_oauth_token_provider`, imported.

        Raises
        ------
        SpecError
            It cannot be imported (the message names the variable).
        """
        return _load_callable(self.sasl_oauth_token_provider)

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
                ctx.load_cert_chain(self.ssl_certfile, self.ssl_keyfile or None,
                                    password=self.ssl_key_password or None)
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


def _coerce(name: str, key: str, raw: Any) -> Any:
    """``raw`` (a string from the environment, or a TOML value) as field ``name``'s type."""
    f = Settings.__dataclass_fields__[name]
    default = f.default
    if isinstance(default, bool):
        if isinstance(raw, bool):
            return raw
        return str(raw).strip().lower() in ("1", "true", "yes", "on")
    if isinstance(default, int):
        if isinstance(raw, int) and not isinstance(raw, bool):
            return raw
        try:
            return int(str(raw).strip())
        except ValueError:
            raise SpecError(f"{key}: expected an integer, got {raw!r}; "
                            f"set it to a whole number such as {default}") from None
    if isinstance(default, tuple):
        if isinstance(raw, list | tuple):
            return tuple(str(p) for p in raw if str(p))
        sep = "," if name in ("plugins", "takeover_from") else os.pathsep
        parts = str(raw).strip().split(sep)
        if name == "takeover_from":  # ids: "blue, green" means blue and green
            parts = [p.strip() for p in parts]
        return tuple(p for p in parts if p)
    if isinstance(raw, dict | list | bool | int | float):
        raise SpecError(f"{key}: expected a string, got {raw!r}")
    return str(raw).strip()


def _scalar(raw: str) -> Any:
    """A raw aiokafka keyword's value from the environment: int, float, bool or string."""
    for conv in (int, float):
        try:
            return conv(raw)
        except ValueError:
            pass
    low = raw.lower()
    if low in ("true", "false"):
        return low == "true"
    return raw


def _env_values(env: Mapping[str, str]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for f in fields(Settings):
        key = f"DPSTREAM_{f.name.upper()}"
        if f.default is not MISSING and key in env:
            values[f.name] = _coerce(f.name, key, env[key])
    aio = {k[len(AIOKAFKA_PREFIX):].lower(): _scalar(v.strip()) for k, v in env.items()
           if k.startswith(AIOKAFKA_PREFIX) and len(k) > len(AIOKAFKA_PREFIX)}
    rdk = {k[len(LIBRDKAFKA_PREFIX):].lower().replace("_", "."): v.strip()
           for k, v in env.items()
           if k.startswith(LIBRDKAFKA_PREFIX) and len(k) > len(LIBRDKAFKA_PREFIX)}
    if aio:
        values["aiokafka_config"] = aio
    if rdk:
        values["librdkafka_config"] = rdk
    return values


def _file_values(path: str) -> dict[str, Any]:
    """The settings in the TOML file ``path`` (keys: field names; ``[kafka.*]`` tables)."""
    try:
        with open(path, "rb") as fh:
            doc = tomllib.load(fh)
    except OSError as exc:
        raise SpecError(f"{CONFIG_ENV}/--config: cannot read {path!r} ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{path}: not TOML ({exc})") from None
    names = [f.name for f in fields(Settings) if f.default is not MISSING]
    values: dict[str, Any] = {}
    kafka = doc.pop("kafka", {})
    if not isinstance(kafka, dict) or set(kafka) - {"aiokafka", "librdkafka"}:
        raise SpecError(f"{path}: [kafka] holds only the tables [kafka.aiokafka] and "
                        "[kafka.librdkafka] (raw client properties)")
    for lib in ("aiokafka", "librdkafka"):
        table = kafka.get(lib, {})
        if not isinstance(table, dict):
            raise SpecError(f"{path}: [kafka.{lib}] must be a table of client properties")
        if table:
            values[f"{lib}_config"] = dict(table)
    for key, raw in doc.items():
        if key not in names:
            close = difflib.get_close_matches(key, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecError(f"{path}: unknown setting {key!r}{hint}")
        values[key] = _coerce(key, f"{path}: {key}", raw)
    return values


def unknown_variables(env: Mapping[str, str]) -> list[str]:
    """One line per ``DPSTREAM_*`` variable of ``env`` that nothing reads, with a close
    match when there is one.

    >>> unknown_variables({"DPSTREAM_BROKERS": "k:9092", "DPSTREAM_BROKER": "k:9092"})
    ['unknown environment variable DPSTREAM_BROKERS (ignored); did you mean DPSTREAM_BROKER?']
    """
    known = {f"DPSTREAM_{f.name.upper()}" for f in fields(Settings)
             if f.default is not MISSING} | OTHER_VARIABLES
    out = []
    for key in sorted(env):
        if (not key.startswith("DPSTREAM_") or key in known
                or key.startswith((AIOKAFKA_PREFIX, LIBRDKAFKA_PREFIX))):
            continue
        close = difflib.get_close_matches(key, sorted(known), n=1)
        out.append(f"unknown environment variable {key} (ignored)"
                   + (f"; did you mean {close[0]}?" if close else ""))
    return out


@functools.lru_cache(maxsize=8)
def _load_callable(spec: str) -> Callable[[], Any]:
    module, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module.strip()), name.strip())
    except (ImportError, AttributeError, ValueError) as exc:
        raise SpecError(f"DPSTREAM_SASL_OAUTH_TOKEN_PROVIDER: cannot load {spec!r} "
                        f"({type(exc).__name__}: {exc}); give module:function importable "
                        "by the worker (e.g. a module listed in DPSTREAM_PLUGINS)") from None
    if not callable(fn):
        raise SpecError(f"DPSTREAM_SASL_OAUTH_TOKEN_PROVIDER: {spec!r} is not callable")
    return fn
