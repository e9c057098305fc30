"""calibrate_counter: every counter kind's calibration carries its factorization's numbers."""

from __future__ import annotations

import pytest

from sketches.counters import factorization as fz
from sketches.counters import family
from sketches.counters.lattice import calibrate_lattice
from sketches.errors import SpecError
from sketches.privacy.calibration import Calibrator


def test_blt_int_calibration_is_the_lattice_calibration_field_for_field() -> None:
    """The lattice's sigma, norms, parameters and sensitivity reach the Calibration, with
    the exact discrete calibrator and the caller's ``cells`` (which bounds the counters one
    unit changes: fewer cells, a smaller rounding slack, a smaller sigma)."""
    kw = dict(eps=1.0, delta=1e-6, m=4, rounds=600, calibrator=Calibrator.DISCRETE, unit_cap=2)
    cal = family.calibrate_counter("blt_int", cells=3, **kw)
    lat = calibrate_lattice(600, eps=1.0, delta=1e-6, m=4, unit_cap=2, cells=3)
    assert cal.calibrator is Calibrator.DISCRETE and cal.integer_noise
    assert cal.counter == "blt_int" and cal.lattice == lat.params
    assert (cal.sigma, cal.lattice_sensitivity) == (lat.sigma, lat.sensitivity)
    assert (cal.column_norm_sq, cal.row_norm_sq) == (lat.params.column_norm_sq,
                                                      lat.params.row_norm_sq)
    assert (cal.eps, cal.delta, cal.m, cal.unit_cap) == (1.0, 1e-6, 4, 2)
    assert cal.levels == (600).bit_length()
    wide = family.calibrate_counter("blt_int", cells=None, **kw)
    assert wide.lattice_sensitivity > cal.lattice_sensitivity and wide.sigma > cal.sigma


def test_a_factorization_with_negative_columns_is_refused(monkeypatch) -> None:
    """The sensitivity bound of every relation needs C >= 0: calibrate_counter checks the
    factorization it calibrates (here one whose check fails) and refuses it."""
    seen: list[object] = []

    def fails_for_real_factorizations(f: object) -> bool:
        seen.append(f)
        return not isinstance(f, fz.Factorization)

    monkeypatch.setattr(fz, "columns_nonnegative", fails_for_real_factorizations)
    with pytest.raises(SpecError, match="negative entries in C"):
        family.calibrate_counter("blt", 1.0, 1e-6, m=4, rounds=64,
                                 calibrator=Calibrator.DISCRETE)
    assert isinstance(seen[0], fz.BLTFactorization) and seen[0].rounds == 64
