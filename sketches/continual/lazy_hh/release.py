"""The public ``heavy_hitters`` payload of a LazyHH output (paper 002 Alg. 6, Theorem 4).

Only post-processing of the last output: noisy estimates of the reported items,
the thresholds, the DP stream-length estimate (add/remove), the Lemma 6 /
Theorem 4 error bound and the stated guarantee (:func:`sketches.continual.lazy_hh.spec.guarantee`).
Never the exact counts, the node noise or the secret hash.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sketches.continual.lazy_hh.spec import HHParams, LazyHHSpec
from sketches.continual.lazy_hh.state import LazyHHState
from sketches.core.candidates import public_item
from sketches.privacy import Clock

__all__ = ["release_payload"]


def release_payload(mechanism: str, spec: LazyHHSpec, params: HHParams, depth: int,
                    st: LazyHHState, priv: dict[str, Any]) -> dict[str, Any]:
    """Public ``heavy_hitters`` payload of the last output in ``st`` (ARCHITECTURE.md).

    ``priv``: the stated guarantee (:func:`~sketches.continual.lazy_hh.spec.guarantee`);
    ``depth``: the sketch's rows. Reads ``st`` only (post-processing).
    """
    th, last = params.thresholds, st.last
    # counts are integers: float (continuous-noise) estimates are published rounded,
    # which also drops the low-order float bits (Mironov 2012; sketches.core.noise)
    est = np.rint(st.hh_est).astype(np.int64).tolist()
    items = [{"item": public_item(x), "estimate": v}
             | ({"item_encoding": "base64"} if isinstance(x, bytes) else {})
             for x, v in zip(st.hh_items.tolist(), est, strict=True)]
    bound = None
    if last:
        bound = {"lower": -th.lambda1, "upper": last["lambda2"],
                 "coverage": last["threshold"] + th.lambda1, "gamma": params.gamma,
                 "failure_probability": spec.beta_value * (1 if st.counter is None else 2),
                 "statement": "at every output time, w.p. >= 1 - failure_probability: "
                 "lower <= estimate - f <= upper for reported items, and every item with "
                 "f > coverage is reported (paper 002 Lemma 6, Theorem 4)"}
    arrival = spec.clock is Clock.ARRIVAL
    return {
        "kind": "heavy_hitters", "mechanism": mechanism, "items": items,
        "threshold": last.get("threshold"), "tau1": last.get("tau1"),
        "tau2": last.get("tau2"), "t_estimate": last.get("t_hat"),
        "length_public": st.counter is None, "error_bound": bound,
        "outputs": st.outputs, "k": spec.k, "k_tilde": spec.k_tilde,
        "depth": depth, "clock": spec.clock.value,
        "lag_bound": spec.k_tilde if arrival else spec.output_every,
        "lag_unit": "events" if arrival else "ticks",
        # "delta" is the guarantee (= delta_tilde); the sketch's input delta of Theorem 3
        # is "delta_parameter" (issue 8 item 7)
        "eps": priv["eps"], "delta": priv["delta"], "delta_tilde": priv["delta_tilde"],
        "delta_parameter": priv["delta_parameter"],
        "budget": priv["budget"], "relation": priv["relation"],
    }
