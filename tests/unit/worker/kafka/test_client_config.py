"""Issue 22 item 3: one Kafka client configuration reaches every client (no broker).

Each client factory of the worker and the CLIs is constructed with its client
class replaced by a recorder, and the arguments it passed are asserted
(``client_id``, SASL mechanism, credentials, TLS key password, tuning, the raw
pass-through). Before this change every client was ``aiokafka-0.14.0`` with
no way to set these, and ``--broker`` dropped the security settings.
"""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sketches.errors import SpecError
from worker.config.settings import Settings, unknown_variables
from worker.kafka import client_config
from worker.kafka.client_config import aiokafka_kwargs, librdkafka_conf

ROOT = Path(__file__).resolve().parents[4]
TOPOLOGY = str(ROOT / "topologies" / "netmon.yaml")

SASL = {"DPSTREAM_BROKER": "kafka-1:9093", "DPSTREAM_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
        "DPSTREAM_SASL_MECHANISM": "SCRAM-SHA-512", "DPSTREAM_SASL_USERNAME": "svc",
        "DPSTREAM_SASL_PASSWORD": "s3cr3t", "DPSTREAM_CLIENT_ID": "billing-{role}",
        "DPSTREAM_GROUP_INSTANCE_ID": "worker-0", "DPSTREAM_FETCH_MAX_BYTES": "1048576",
        "DPSTREAM_MAX_PARTITION_FETCH_BYTES": "262144",
        "DPSTREAM_REQUEST_TIMEOUT_MS": "45000", "DPSTREAM_AIOKAFKA_METADATA_MAX_AGE_MS": "60000",
        "DPSTREAM_LIBRDKAFKA_TOPIC_METADATA_REFRESH_INTERVAL_MS": "60000",
        "DPSTREAM_METRICS_PORT": "0"}


def token() -> tuple[str, float]:
    """The OAUTHBEARER token provider of the tests."""
    return "tok-123", 2_000_000_000.0


class Recorder:
    """Stands for a Kafka client class: records its keyword arguments."""

    made: ClassVar[list[tuple[str, dict[str, Any]]]] = []
    fail_start = False

    def __init__(self, *topics: str, **kwargs: Any) -> None:
        self.kwargs = kwargs
        Recorder.made.append((type(self).__name__, kwargs))

    async def start(self) -> None:
        if self.fail_start:
            raise _Stop

    async def stop(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def assign(self, tps: Any) -> None:
        return None

    async def seek_to_beginning(self, *tps: Any) -> None:
        return None


class _Stop(Exception):
    pass


class Producer(Recorder):
    pass


class CkConsumer(Recorder):
    pass


class InputConsumer(Recorder):
    fail_start = True


@pytest.fixture(autouse=True)
def _fresh() -> None:
    Recorder.made = []


def settings(**extra: str) -> Settings:
    return Settings.from_env({**SASL, **extra})


def test_worker_clients_get_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    """Producer, checkpoint consumer and input consumer as worker/runtime/lifecycle.py
    builds them."""
    from worker.runtime import lifecycle
    from worker.runtime.worker import create_worker

    async def no_topics(*a: Any) -> None:
        return None

    monkeypatch.setattr(lifecycle, "declare_topics", no_topics)
    monkeypatch.setattr(lifecycle, "AIOKafkaProducer", Producer)
    monkeypatch.setattr(lifecycle, "AIOKafkaConsumer", CkConsumer)
    monkeypatch.setattr(lifecycle, "input_consumer_class", lambda: InputConsumer)
    worker = create_worker(settings(), [TOPOLOGY])
    with pytest.raises(_Stop):
        asyncio.run(worker.start())
    made = dict(Recorder.made)
    prod, ck, inp = made["Producer"], made["CkConsumer"], made["InputConsumer"]
    for kw, role in ((prod, "producer"), (ck, "checkpoint"), (inp, "input")):
        assert kw["client_id"] == f"billing-{role}"
        assert kw["bootstrap_servers"] == "kafka-1:9093"
        assert kw["sasl_mechanism"] == "SCRAM-SHA-512"
        assert (kw["sasl_plain_username"], kw["sasl_plain_password"]) == ("svc", "s3cr3t")
        assert kw["request_timeout_ms"] == 45000 and kw["metadata_max_age_ms"] == 60000
    assert prod["acks"] == "all" and prod["enable_idempotence"] is False  # fixed by the worker
    assert "fetch_max_bytes" not in prod
    assert ck["group_id"] is None and "isolation_level" not in ck
    assert inp["group_instance_id"] == "worker-0" and "group_instance_id" not in ck
    assert inp["isolation_level"] == "read_committed"  # issue 22 item 2
    assert (inp["fetch_max_bytes"], inp["max_partition_fetch_bytes"]) == (1048576, 262144)
    assert inp["group_id"] == "dpstream" and inp["enable_auto_commit"] is False
    assert inp["value_deserializer"] is worker.fetch_mode


def test_admin_gets_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    from worker.kafka import admin

    class Admin(Recorder):
        fail_start = True

    monkeypatch.setattr(admin, "AIOKafkaAdminClient", Admin)
    with pytest.raises(_Stop):
        asyncio.run(admin.declare_topics(settings(), []))
    kw = dict(Recorder.made)["Admin"]
    assert kw["client_id"] == "billing-admin" and kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert "fetch_max_bytes" not in kw and kw["metadata_max_age_ms"] == 60000


def test_check_broker_probe_gets_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    import aiokafka.admin

    from worker.kafka.broker_watch import BrokerUnavailable, check_broker

    class Admin(Recorder):
        fail_start = True

    monkeypatch.setattr(aiokafka.admin, "AIOKafkaAdminClient", Admin)
    s = settings()
    with pytest.raises(BrokerUnavailable):
        asyncio.run(check_broker(s.broker, aiokafka_kwargs(s, "probe"), timeout_s=2))
    kw = dict(Recorder.made)["Admin"]
    assert kw["client_id"] == "billing-probe" and kw["sasl_plain_password"] == "s3cr3t"
    assert kw["request_timeout_ms"] == 2000


def test_release_reader_and_follower_get_the_configuration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import aiokafka
    import aiokafka.admin

    from worker.kafka.release_follower import follow_release_topics
    from worker.kafka.release_reader import ReleaseReader

    class Consumer(Recorder):
        fail_start = True

    class Admin(Recorder):
        pass

    monkeypatch.setattr(aiokafka, "AIOKafkaConsumer", Consumer)
    monkeypatch.setattr(aiokafka.admin, "AIOKafkaAdminClient", Admin)
    s = settings()
    with pytest.raises(_Stop):
        asyncio.run(ReleaseReader("other:9092", "rel",
                                  client_options=aiokafka_kwargs(s, "query")).start())
    kw = Recorder.made[-1][1]
    assert kw["client_id"] == "billing-query" and kw["bootstrap_servers"] == "other:9092"
    assert kw["group_id"] is None and kw["sasl_mechanism"] == "SCRAM-SHA-512"

    async def follow() -> None:
        async for _ in follow_release_topics("other:9092", ["rel"], replay=0,
                                             client_options=aiokafka_kwargs(s, "dashboard")):
            pass

    with pytest.raises(_Stop):
        asyncio.run(follow())
    made = dict(Recorder.made)
    assert made["Consumer"]["client_id"] == "billing-dashboard"
    assert made["Admin"]["client_id"] == "billing-dashboard"
    assert made["Admin"]["sasl_plain_password"] == "s3cr3t"
    assert "fetch_max_bytes" not in made["Admin"]  # an admin keyword set only


def test_confluent_reader_gets_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    import confluent_kafka

    from worker.kafka.release_reader import ConfluentReleaseReader

    seen: list[dict[str, Any]] = []

    class Consumer:
        def __init__(self, conf: dict[str, Any]) -> None:
            seen.append(conf)
            raise _Stop

    monkeypatch.setattr(confluent_kafka, "Consumer", Consumer)
    s = settings(DPSTREAM_SSL_KEY_PASSWORD="kp", DPSTREAM_SECURITY_PROTOCOL="SASL_SSL",
                 DPSTREAM_SSL_KEYFILE="/k.pem")
    with pytest.raises(_Stop):
        ConfluentReleaseReader("other:9092", "rel", config=librdkafka_conf(s, "tail")).start()
    conf = seen[0]
    assert conf["client.id"] == "billing-tail" and conf["bootstrap.servers"] == "other:9092"
    assert conf["sasl.mechanism"] == "SCRAM-SHA-512" and conf["sasl.password"] == "s3cr3t"
    assert conf["ssl.key.password"] == "kp" and conf["ssl.key.location"] == "/k.pem"
    assert conf["fetch.max.bytes"] == 1048576
    assert conf["topic.metadata.refresh.interval.ms"] == "60000"  # raw pass-through
    assert conf["enable.auto.commit"] is False  # fixed by the reader


def test_tls_key_password_reaches_the_ssl_context(monkeypatch: pytest.MonkeyPatch) -> None:
    chains: list[tuple[Any, ...]] = []

    class Ctx:
        def load_cert_chain(self, cert: str, key: str | None = None,
                            password: str | None = None) -> None:
            chains.append((cert, key, password))

    monkeypatch.setattr(ssl, "create_default_context", lambda cafile=None: Ctx())
    s = Settings(security_protocol="SSL", ssl_certfile="/c.pem", ssl_keyfile="/k.pem",
                 ssl_key_password="kp")
    kw = aiokafka_kwargs(s, "producer")
    assert isinstance(kw["ssl_context"], Ctx) and chains == [("/c.pem", "/k.pem", "kp")]


def test_oauthbearer_token_provider_hook() -> None:
    s = Settings(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                 sasl_oauth_token_provider=f"{__name__}:token")
    kw = aiokafka_kwargs(s, "input")
    from aiokafka.abc import AbstractTokenProvider

    provider = kw["sasl_oauth_token_provider"]
    assert isinstance(provider, AbstractTokenProvider)
    assert asyncio.run(provider.token()) == "tok-123"
    assert "sasl_plain_password" not in kw
    conf = librdkafka_conf(s, "tail")
    assert conf["sasl.mechanism"] == "OAUTHBEARER"
    assert conf["oauth_cb"]("") == ("tok-123", 2_000_000_000.0)
    with pytest.raises(SpecError, match="DPSTREAM_SASL_OAUTH_TOKEN_PROVIDER"):
        aiokafka_kwargs(Settings(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER",
                                 sasl_oauth_token_provider="no_such_module:f"), "input")
    with pytest.raises(SpecError, match="OAUTHBEARER needs a token provider"):
        Settings(security_protocol="SASL_SSL", sasl_mechanism="OAUTHBEARER")


def test_gssapi_says_what_is_needed() -> None:
    s = Settings(security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI",
                 sasl_kerberos_service_name="kafka-prod")
    try:
        import gssapi  # noqa: F401
    except ImportError:
        with pytest.raises(SpecError, match=r"gssapi package"):
            aiokafka_kwargs(s, "input")
    else:  # pragma: no cover - not installed here
        assert aiokafka_kwargs(s, "input")["sasl_kerberos_service_name"] == "kafka-prod"
    assert librdkafka_conf(s, "tail")["sasl.kerberos.service.name"] == "kafka-prod"


def test_isolation_level_is_configurable_and_checked() -> None:
    assert Settings().isolation_level == "read_committed"
    s = Settings.from_env({"DPSTREAM_ISOLATION_LEVEL": "read_uncommitted"})
    assert aiokafka_kwargs(s, "input")["isolation_level"] == "read_uncommitted"
    assert aiokafka_kwargs(s, "repartition-consumer")["isolation_level"] == "read_uncommitted"
    with pytest.raises(SpecError, match="DPSTREAM_ISOLATION_LEVEL"):
        Settings.from_env({"DPSTREAM_ISOLATION_LEVEL": "committed"})


def test_raw_pass_through_is_filtered_by_client_kind(
        caplog: pytest.LogCaptureFixture) -> None:
    s = Settings(aiokafka_config={"fetch_min_bytes": 10, "linger_ms": 50, "no_such": 1})
    client_config._warned.discard("no_such")
    with caplog.at_level("WARNING"):
        cons, prod = aiokafka_kwargs(s, "input"), aiokafka_kwargs(s, "producer")
    assert cons["fetch_min_bytes"] == 10 and "linger_ms" not in cons
    assert prod["linger_ms"] == 50 and "fetch_min_bytes" not in prod
    assert "no_such" not in cons and "'no_such'" in caplog.text
    # what the worker fixes wins over the pass-through
    s = Settings(aiokafka_config={"group_id": "hijack"})
    assert aiokafka_kwargs(s, "input", {"group_id": "g"})["group_id"] == "g"


def test_settings_file_under_the_environment(tmp_path: Path) -> None:
    cfg = tmp_path / "dpstream.toml"
    cfg.write_text('broker = "file:9092"\nclient_id = "from-file"\nfetch_max_bytes = 2048\n'
                   'security_protocol = "SASL_PLAINTEXT"\nsasl_mechanism = "PLAIN"\n'
                   '[kafka.aiokafka]\nmetadata_max_age_ms = 1000\nretry_backoff_ms = 7\n'
                   '[kafka.librdkafka]\n"socket.keepalive.enable" = true\n')
    env = {"DPSTREAM_CONFIG": str(cfg), "DPSTREAM_CLIENT_ID": "from-env",
           "DPSTREAM_AIOKAFKA_RETRY_BACKOFF_MS": "9"}
    s = Settings.load(env, warn=False)
    assert (s.broker, s.client_id, s.fetch_max_bytes) == ("file:9092", "from-env", 2048)
    assert s.aiokafka_config == {"metadata_max_age_ms": 1000, "retry_backoff_ms": 9}
    assert librdkafka_conf(s, "tail")["socket.keepalive.enable"] is True
    # --config beats $DPSTREAM_CONFIG; a flag (with_broker) beats both
    other = tmp_path / "other.toml"
    other.write_text('broker = "other:9092"\n')
    assert Settings.load(env, str(other), warn=False).broker == "other:9092"
    assert Settings.load(env, warn=False).with_broker("flag:1").broker == "flag:1"
    bad = tmp_path / "bad.toml"
    bad.write_text('brokr = "x:1"\n')
    with pytest.raises(SpecError, match="did you mean 'broker'"):
        Settings.load({"DPSTREAM_CONFIG": str(bad)}, warn=False)


def test_unknown_variables_are_warned_once_each(caplog: pytest.LogCaptureFixture) -> None:
    env = {"DPSTREAM_SASL_PASWORD": "x", "DPSTREAM_ISOLATION": "read_committed",
           "DPSTREAM_BROKER": "k:1", "DPSTREAM_LIBRDKAFKA_CLIENT_RACK": "a",
           "DPSTREAM_BROKER_BIN": "/bin/tansu"}
    lines = unknown_variables(env)
    assert lines == [
        "unknown environment variable DPSTREAM_ISOLATION (ignored); did you mean "
        "DPSTREAM_ISOLATION_LEVEL?",
        "unknown environment variable DPSTREAM_SASL_PASWORD (ignored); did you mean "
        "DPSTREAM_SASL_PASSWORD?"]
    with caplog.at_level("WARNING", logger="worker.config.settings"):
        Settings.load(env)
    assert [r.getMessage() for r in caplog.records] == lines


def test_every_role_has_a_kind_and_a_client_id() -> None:
    for role, kind in client_config.ROLES.items():
        kw = aiokafka_kwargs(Settings(), role)
        assert kw["client_id"] == f"dpstream-{role}"
        assert ("fetch_max_bytes" in kw) == (kind == "consumer")
        assert set(kw) <= client_config._aiokafka_params(kind) | {"bootstrap_servers"}
    with pytest.raises(ValueError, match="unknown Kafka client role"):
        aiokafka_kwargs(Settings(), "nope")


def test_settings_stay_hashable_with_raw_properties() -> None:
    s = Settings(aiokafka_config={"metadata_max_age_ms": 1}, librdkafka_config={"a.b": "c"})
    assert hash(s) == hash(Settings())  # the raw tables do not take part in the hash
    assert s != Settings()
