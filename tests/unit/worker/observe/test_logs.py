"""Logging an operator can ship (issue 23): one format for every logger, JSON lines
with the topology/shard/partition fields, ``--log-level`` and ``--version``."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from worker.observe.logs import configure_logging, log_context, reset_logging

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    reset_logging()


def _lines(stream: io.StringIO) -> list[str]:
    return [ln for ln in stream.getvalue().splitlines() if ln.strip()]


def test_json_lines_parse_and_carry_the_fields() -> None:
    stream = io.StringIO()
    configure_logging("INFO", "json", stream=stream)
    log = logging.getLogger("worker.engine.engine")
    log.info("plain")
    log.warning("with extra", extra={"topology": "netmon", "shard": "r7", "partition": 2})
    with log_context(topology="netmon", partition=3):
        log.error("in context")
        with log_context(shard="r1"):
            log.info("nested")
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        log.exception("failed")
    recs = [json.loads(ln) for ln in _lines(stream)]
    assert len(recs) == 5
    for r in recs:
        assert set(r) >= {"time", "level", "logger", "message"}
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", r["time"])
        assert r["logger"] == "worker.engine.engine"
    assert "topology" not in recs[0]
    assert (recs[1]["level"], recs[1]["topology"], recs[1]["shard"], recs[1]["partition"]) \
        == ("WARNING", "netmon", "r7", 2)
    assert (recs[2]["topology"], recs[2]["partition"]) == ("netmon", 3)
    assert (recs[3]["topology"], recs[3]["shard"], recs[3]["partition"]) == ("netmon", "r1", 3)
    assert "ValueError: boom" in recs[4]["exc"] and "topology" not in recs[4]


def test_library_loggers_use_the_one_format() -> None:
    """Faust/mode and aiokafka loggers with handlers of their own lose them: every line
    goes through the one handler (today two formats interleave)."""
    other = io.StringIO()
    faust_log = logging.getLogger("faust.worker")
    faust_log.addHandler(logging.StreamHandler(other))
    faust_log.propagate = False
    stream = io.StringIO()
    configure_logging("INFO", "json", stream=stream)
    faust_log.info("[^Worker]: Starting...")
    logging.getLogger("mode.services").warning("service warning")
    logging.getLogger("aiokafka.conn").warning("Unable connect to broker")
    logging.getLogger("aiokafka.conn").info("chatty (below WARNING at INFO)")
    recs = [json.loads(ln) for ln in _lines(stream)]
    assert [r["logger"] for r in recs] == ["faust.worker", "mode.services", "aiokafka.conn"]
    assert other.getvalue() == ""


def test_text_format_is_one_style_with_fields() -> None:
    stream = io.StringIO()
    configure_logging("DEBUG", "text", stream=stream)
    logging.getLogger("aiokafka").debug("debug reaches the Kafka loggers at DEBUG")
    with log_context(topology="t", partition=0):
        logging.getLogger("worker.x").info("hello")
    lines = _lines(stream)
    assert len(lines) == 2
    assert re.fullmatch(r"\S+Z DEBUG aiokafka: debug reaches .*", lines[0])
    assert lines[1].endswith("INFO worker.x: hello [topology=t partition=0]")


def test_bad_level_and_format_are_one_line_errors() -> None:
    from sketches.errors import SpecError

    with pytest.raises(SpecError, match="--log-level or DPSTREAM_LOG_LEVEL"):
        configure_logging("LOUD")
    with pytest.raises(SpecError, match="DPSTREAM_LOG_FORMAT"):
        configure_logging("INFO", "xml")


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    from worker.cli.main import main, version

    text = (ROOT / "pyproject.toml").read_text()
    expected = re.search(r'(?m)^version = "([^"]+)"', text)
    assert expected is not None and version() == expected.group(1)
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"dpstream {expected.group(1)}"


def test_log_level_on_every_command(monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from worker.cli.main import build_parser, main

    monkeypatch.setenv("DPSTREAM_LOG_LEVEL", "INFO")
    topo = str(ROOT / "topologies/netmon.yaml")
    assert main(["validate", topo, "--log-level", "warning"]) == 0
    assert logging.getLogger().level == logging.WARNING
    assert main(["--log-level=DEBUG", "plan", topo]) == 0
    assert logging.getLogger().level == logging.DEBUG
    assert main(["validate", topo, "--log-level", "LOUD"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("dpstream: log level 'LOUD'")
    sub = build_parser()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    for name in ("run", "demo", "validate", "plan"):
        assert "--log-level" in sub[name].format_help()
    from worker.cli.dashboard import build_parser as dash_parser

    assert "--log-level" in dash_parser().format_help()
    for cmd in ("tail", "query"):
        with pytest.raises(SystemExit):
            main([cmd, "-h"])
        assert "--log-level" in capsys.readouterr().out
