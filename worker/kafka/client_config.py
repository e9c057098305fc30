"""The one place Kafka client arguments are built: every client the worker and the CLIs create.

Two functions, one per client library, from :class:`worker.config.settings.Settings`:

- :func:`aiokafka_kwargs` ``(settings, role)``: keyword arguments of
  ``AIOKafkaConsumer`` / ``AIOKafkaProducer`` / ``AIOKafkaAdminClient``;
- :func:`librdkafka_conf` ``(settings, role)``: a confluent-kafka configuration dict.

``role`` names the client (:data:`ROLES`: ``input``, ``producer``,
``checkpoint``, ``admin``, ``reader``, ``dashboard``, ``tail``, ``query``,
``repartition-producer``, ``repartition-consumer``, ...); it decides the
client's kind (consumer, producer, admin) and so which settings apply:

- every client: ``bootstrap``, ``client.id`` (``settings.client_id`` with
  ``{role}`` replaced: default ``dpstream-<role>``), ``request.timeout.ms``
  (librdkafka consumers: ``socket.timeout.ms``), security (SASL
  PLAIN/SCRAM-SHA-256/SCRAM-SHA-512/OAUTHBEARER/GSSAPI, TLS CA, certificate,
  key and key password);
- consumers: ``fetch.max.bytes``, ``max.partition.fetch.bytes``;
- input consumers (:data:`INPUT_ROLES`, members of the worker's group):
  session, heartbeat, poll and rebalance timeouts, ``isolation.level``
  (``read_committed`` by default), and for ``input`` the
  ``group.instance.id`` (static membership) when set;
- last, the raw pass-through properties (``settings.aiokafka_config`` /
  ``librdkafka_config``), restricted for aiokafka to the keywords the client's
  class accepts (a keyword no aiokafka client accepts is logged once).

What a client fixes for correctness (group id, auto commit, offset reset,
``acks``, idempotence, deserializers) is passed by the caller as ``fixed``
and wins over everything here.

OAUTHBEARER: the ``module:function`` of ``settings.sasl_oauth_token_provider``
is imported when the arguments are built (at start-up) and returns a token or
``(token, expiry_unix_seconds)``; aiokafka gets it as an
``AbstractTokenProvider`` (``sasl_oauth_token_provider``), librdkafka as
``oauth_cb``. GSSAPI: aiokafka needs the ``gssapi`` package
(``pip install aiokafka[gssapi]``) and a Kerberos ticket (``kinit`` or
``KRB5_CLIENT_KTNAME``), with ``sasl_kerberos_service_name``; librdkafka needs
a build with Cyrus SASL (the confluent-kafka wheels' does not have it: a
:class:`~sketches.errors.SpecError` says so at start-up).
"""

from __future__ import annotations

import functools
import inspect
import logging
import ssl
import time
from collections.abc import Callable, Mapping
from typing import Any

from sketches.errors import SpecError
from worker.config.settings import Settings

log = logging.getLogger(__name__)

ROLES: dict[str, str] = {
    "input": "consumer",  # the worker's input consumer (group member, tuple mode)
    "producer": "producer",  # releases, dead letters and checkpoints
    "checkpoint": "consumer",  # reads the checkpoint topic back
    "admin": "admin",  # declares and describes topics
    "probe": "admin",  # `dpstream run`'s start-up reachability check
    "reader": "consumer",  # ReleaseReader / ConfluentReleaseReader
    "query": "consumer",  # dpstream query
    "tail": "consumer",  # dpstream tail
    "dashboard": "consumer",  # the dashboard's release follower
    "dashboard-admin": "admin",  # the dashboard follower's topic discovery
    "demo-producer": "producer",
    "repartition-producer": "producer",  # forwards records to the repartition topic
    "repartition-consumer": "consumer",  # reads the repartition topic (an input)
}
"""Every client role and its kind (``consumer``, ``producer`` or ``admin``)."""

INPUT_ROLES = frozenset({"input", "repartition-consumer"})
"""Consumers of input records: group timers and ``isolation.level`` apply to them."""

_warned: set[str] = set()


def kind_of(role: str) -> str:
    """The kind of client ``role`` is (``consumer``, ``producer`` or ``admin``)."""
    try:
        return ROLES[role]
    except KeyError:
        raise ValueError(f"unknown Kafka client role {role!r}; add it to "
                         "worker.kafka.client_config.ROLES") from None


def client_id(settings: Settings, role: str) -> str:
    """``client.id`` of the ``role`` client.

    >>> client_id(Settings(), "input"), client_id(Settings(client_id="billing"), "input")
    ('dpstream-input', 'billing')
    """
    return settings.client_id.replace("{role}", role)


# ---------------------------------------------------------------- aiokafka


@functools.cache
def _aiokafka_params(kind: str) -> frozenset[str]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka.admin import AIOKafkaAdminClient

    cls = {"consumer": AIOKafkaConsumer, "producer": AIOKafkaProducer,
           "admin": AIOKafkaAdminClient}[kind]
    return frozenset(inspect.signature(cls.__init__).parameters) - {"self", "loop", "topics"}


def _token_provider(fn: Callable[[], Any]) -> Any:
    from aiokafka.abc import AbstractTokenProvider

    class _Provider(AbstractTokenProvider):
        """The configured ``module:function`` as aiokafka's token provider."""

        async def token(self) -> str:
            got = fn()
            if inspect.isawaitable(got):
                got = await got
            return str(got[0] if isinstance(got, tuple) else got)

    return _Provider()


def aiokafka_security(settings: Settings) -> dict[str, Any]:
    """aiokafka's security keywords (protocol, SASL, TLS) for ``settings``."""
    kw: dict[str, Any] = {"security_protocol": settings.security_protocol}
    if settings.security_protocol.startswith("SASL"):
        mech = settings.sasl_mechanism or "PLAIN"
        kw["sasl_mechanism"] = mech
        if mech == "OAUTHBEARER":
            kw["sasl_oauth_token_provider"] = _token_provider(settings.oauth_token_provider())
        elif mech == "GSSAPI":
            try:
                import gssapi  # noqa: F401
            except ImportError:
                raise SpecError("DPSTREAM_SASL_MECHANISM=GSSAPI: aiokafka needs the gssapi "
                                "package (pip install 'aiokafka[gssapi]') and a Kerberos "
                                "ticket (kinit, or KRB5_CLIENT_KTNAME for a keytab)") from None
            kw["sasl_kerberos_service_name"] = settings.sasl_kerberos_service_name
            if settings.sasl_kerberos_domain_name:
                kw["sasl_kerberos_domain_name"] = settings.sasl_kerberos_domain_name
        else:
            kw["sasl_plain_username"] = settings.sasl_username
            kw["sasl_plain_password"] = settings.sasl_password
    if settings.security_protocol.endswith("SSL"):
        ctx = ssl.create_default_context(cafile=settings.ssl_cafile or None)
        if settings.ssl_certfile:
            ctx.load_cert_chain(settings.ssl_certfile, settings.ssl_keyfile or None,
                                password=settings.ssl_key_password or None)
        kw["ssl_context"] = ctx
    return kw


def aiokafka_kwargs(settings: Settings, role: str,
                    fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Keyword arguments of the aiokafka client playing ``role`` (module docstring).

    >>> kw = aiokafka_kwargs(Settings(broker="k:9092"), "input")
    >>> kw["client_id"], kw["isolation_level"], kw["max_partition_fetch_bytes"]
    ('dpstream-input', 'read_committed', 8388608)
    >>> "isolation_level" in aiokafka_kwargs(Settings(), "producer")
    False
    """
    kind = kind_of(role)
    kw: dict[str, Any] = {"bootstrap_servers": settings.broker,
                          "client_id": client_id(settings, role),
                          "request_timeout_ms": settings.request_timeout_ms,
                          **aiokafka_security(settings)}
    if kind == "consumer":
        kw["fetch_max_bytes"] = settings.fetch_max_bytes
        kw["max_partition_fetch_bytes"] = settings.max_partition_fetch_bytes
    if role in INPUT_ROLES:
        kw.update(session_timeout_ms=settings.session_timeout_ms,
                  heartbeat_interval_ms=settings.heartbeat_interval_ms,
                  max_poll_interval_ms=settings.max_poll_interval_ms,
                  rebalance_timeout_ms=settings.rebalance_timeout_ms,
                  isolation_level=settings.isolation_level)
        if role == "input" and settings.group_instance_id:
            kw["group_instance_id"] = settings.group_instance_id
    accepted = _aiokafka_params(kind)
    for key, value in settings.aiokafka_config.items():
        if key in accepted:
            kw[key] = value
        elif not any(key in _aiokafka_params(k) for k in ("consumer", "producer", "admin")):
            if key not in _warned:
                _warned.add(key)
                log.warning("aiokafka option %r (DPSTREAM_AIOKAFKA_%s / [kafka.aiokafka]) is "
                            "not a keyword of any aiokafka client: ignored", key, key.upper())
    kw.update(fixed or {})
    return kw


def for_kind(kwargs: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """The keywords of ``kwargs`` that an aiokafka client of ``kind`` accepts (a consumer's
    arguments reused for an admin client, e.g. by the dashboard's follower).

    >>> sorted(for_kind({"client_id": "x", "fetch_max_bytes": 1}, "admin"))
    ['client_id']
    """
    accepted = _aiokafka_params(kind)
    return {k: v for k, v in kwargs.items() if k in accepted}


# ---------------------------------------------------------------- librdkafka


def _oauth_cb(fn: Callable[[], Any]) -> Callable[[str], tuple[str, float]]:
    def oauth_cb(_config: str) -> tuple[str, float]:
        got = fn()
        if isinstance(got, tuple):
            return str(got[0]), float(got[1])
        return str(got), time.time() + 3600.0  # no expiry given: refreshed after an hour

    return oauth_cb


def librdkafka_conf(settings: Settings, role: str,
                    fixed: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """confluent-kafka (librdkafka) configuration of the client playing ``role``.

    >>> conf = librdkafka_conf(Settings(broker="k:9092", isolation_level="read_uncommitted"),
    ...                        "tail")
    >>> conf["bootstrap.servers"], conf["client.id"], conf["fetch.max.bytes"]
    ('k:9092', 'dpstream-tail', 52428800)
    >>> librdkafka_conf(Settings(), "input")["isolation.level"]
    'read_committed'
    """
    kind = kind_of(role)
    conf: dict[str, Any] = {"bootstrap.servers": settings.broker,
                            "client.id": client_id(settings, role),
                            "security.protocol": settings.security_protocol}
    conf["request.timeout.ms" if kind == "producer" else "socket.timeout.ms"] = (
        settings.request_timeout_ms)
    if settings.security_protocol.startswith("SASL"):
        mech = settings.sasl_mechanism or "PLAIN"
        conf["sasl.mechanism"] = mech
        if mech == "OAUTHBEARER":
            conf["oauth_cb"] = _oauth_cb(settings.oauth_token_provider())
        elif mech == "GSSAPI":
            conf["sasl.kerberos.service.name"] = settings.sasl_kerberos_service_name
        else:
            conf["sasl.username"] = settings.sasl_username
            conf["sasl.password"] = settings.sasl_password
    if settings.security_protocol.endswith("SSL"):
        for key, value in (("ssl.ca.location", settings.ssl_cafile),
                           ("ssl.certificate.location", settings.ssl_certfile),
                           ("ssl.key.location", settings.ssl_keyfile),
                           ("ssl.key.password", settings.ssl_key_password)):
            if value:
                conf[key] = value
    if kind == "consumer":
        conf["fetch.max.bytes"] = settings.fetch_max_bytes
        conf["max.partition.fetch.bytes"] = settings.max_partition_fetch_bytes
    if role in INPUT_ROLES:
        conf.update({"session.timeout.ms": settings.session_timeout_ms,
                     "heartbeat.interval.ms": settings.heartbeat_interval_ms,
                     "max.poll.interval.ms": settings.max_poll_interval_ms,
                     "isolation.level": settings.isolation_level})
        if role == "input" and settings.group_instance_id:
            conf["group.instance.id"] = settings.group_instance_id
    conf.update(settings.librdkafka_config)
    conf.update(fixed or {})
    return conf


def check_librdkafka(conf: Mapping[str, Any]) -> None:
    """Fail in one line when this librdkafka cannot do the configured SASL mechanism.

    Raises
    ------
    SpecError
        ``GSSAPI`` with a librdkafka built without Cyrus SASL (the confluent-kafka wheels).
    """
    if conf.get("sasl.mechanism") != "GSSAPI":
        return
    from confluent_kafka import KafkaException, Producer

    try:
        Producer({k: v for k, v in conf.items() if k in (
            "bootstrap.servers", "security.protocol", "sasl.mechanism",
            "sasl.kerberos.service.name")})
    except KafkaException as exc:
        raise SpecError(f"DPSTREAM_SASL_MECHANISM=GSSAPI: this librdkafka cannot ({exc}); "
                        "install confluent-kafka built against a librdkafka with Cyrus SASL "
                        "(libsasl2), or use `dpstream query` (aiokafka)") from None
