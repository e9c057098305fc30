"""``dpstream validate`` gives ``run``'s verdict: one set of start-up checks
(:mod:`worker.engine.startup`), the same message from both (issue 23)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from sketches.errors import SpecError
from worker.cli.main import main
from worker.config.settings import Settings
from worker.runtime.worker import create_worker

ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    yield
    from worker.observe.logs import reset_logging

    reset_logging()


def _validate(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["validate", str(path)])
    return code, capsys.readouterr().err.strip()


def _start(path: Path) -> str:
    with pytest.raises(SpecError) as exc:
        create_worker(Settings.from_env().with_broker("127.0.0.1:9"), [str(path)])
    return str(exc.value)


def test_sigma_beyond_the_sampler_range_is_refused_by_both(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (ROOT / "topologies/analytics_pipeline.yaml").read_text()
    topo = tmp_path / "tiny_eps.yaml"
    topo.write_text(re.sub(r"(?m)^  eps: [0-9.]+", "  eps: 0.000000001", text))
    code, err = _validate(topo, capsys)
    assert code == 2
    assert "exceeds the largest supported integer-noise sigma" in err
    assert err == f"dpstream: {_start(topo)}"


def test_memory_limit_is_refused_by_both(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DPSTREAM_MEMORY_LIMIT_BYTES", "1000")
    topo = ROOT / "topologies/netmon.yaml"
    code, err = _validate(topo, capsys)
    assert code == 2, err
    assert "DPSTREAM_MEMORY_LIMIT_BYTES=1,000" in err
    assert err == f"dpstream: {_start(topo)}"


def test_validate_still_passes_what_run_starts(monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DPSTREAM_MEMORY_LIMIT_BYTES", str(64 * 1024 * 1024))
    assert main(["validate", str(ROOT / "topologies/netmon.yaml")]) == 0
    create_worker(Settings.from_env().with_broker("127.0.0.1:9"),
                  [str(ROOT / "topologies/netmon.yaml")])
