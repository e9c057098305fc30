"""Settings from the environment: defaults, parsing, validation messages."""

from __future__ import annotations

import pytest

from sketches.errors import SpecError
from worker.config.settings import Settings


def test_defaults_bind_metrics_to_loopback_and_use_short_group_timers() -> None:
    s = Settings.from_env({})
    assert s.broker == "" and s.metrics_host == "127.0.0.1" and s.metrics_port == 9108
    assert (s.session_timeout_ms, s.heartbeat_interval_ms) == (6000, 1000)
    assert s.assignment == "group"


def test_env_parsing_of_every_kind() -> None:
    s = Settings.from_env({
        "DPSTREAM_BROKER": "k1:9092,k2:9092", "DPSTREAM_METRICS_PORT": "9200",
        "DPSTREAM_TOPOLOGIES": "a.yaml:b.yaml", "DPSTREAM_PLUGINS": "x.y,z",
        "DPSTREAM_ASSIGNMENT": "static", "OTHER": "ignored"})
    assert s.broker == "k1:9092,k2:9092" and s.metrics_port == 9200
    assert s.topologies == ("a.yaml", "b.yaml") and s.plugins == ("x.y", "z")
    assert s.assignment == "static"


def test_sasl_ssl_pass_through() -> None:
    s = Settings.from_env({"DPSTREAM_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                           "DPSTREAM_SASL_MECHANISM": "SCRAM-SHA-256",
                           "DPSTREAM_SASL_USERNAME": "u", "DPSTREAM_SASL_PASSWORD": "s3cr3t"})
    kw = s.kafka_security_kwargs()
    assert kw == {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "SCRAM-SHA-256",
                  "sasl_plain_username": "u", "sasl_plain_password": "s3cr3t"}
    assert "s3cr3t" not in repr(s)  # the password is not in repr
    ssl_kw = Settings(security_protocol="SSL").kafka_security_kwargs()
    assert ssl_kw["ssl_context"] is not None


@pytest.mark.parametrize(("env", "field"), [
    ({"DPSTREAM_METRICS_PORT": "x"}, "DPSTREAM_METRICS_PORT"),
    ({"DPSTREAM_METRICS_PORT": "70000"}, "DPSTREAM_METRICS_PORT"),
    ({"DPSTREAM_SECURITY_PROTOCOL": "TLS"}, "DPSTREAM_SECURITY_PROTOCOL"),
    ({"DPSTREAM_ASSIGNMENT": "manual"}, "DPSTREAM_ASSIGNMENT"),
    ({"DPSTREAM_HEARTBEAT_INTERVAL_MS": "9000"}, "DPSTREAM_HEARTBEAT_INTERVAL_MS"),
    ({"DPSTREAM_CRASH_POINTS": "a:b"}, "DPSTREAM_CRASH_POINTS"),
])
def test_errors_name_the_variable(env: dict[str, str], field: str) -> None:
    with pytest.raises(SpecError, match=field):
        Settings.from_env(env).crash_probabilities()


def test_crash_points_parse() -> None:
    s = Settings(crash_points="after_checkpoint:0.25, mid_publish")
    assert s.crash_probabilities() == {"after_checkpoint": 0.25, "mid_publish": 1.0}
