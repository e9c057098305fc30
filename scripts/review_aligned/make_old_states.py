"""Run with PYTHONPATH=<a checkout of 6cbd81e> (before c79769e): writes /tmp/old_*.bin/.npy
for check_old_states.py (run that one with the new code)."""

import numpy as np

from sketches.continual.lazy import LazyCMS, LazyCS, LazySketchSpec
from sketches.core.noise import make_noise

Z = make_noise("zero", allow_insecure=True)
out = {}
for cls in (LazyCMS, LazyCS):
    for counter, cpt in (("tree", None), ("tree", 4), ("blt_int", None)):
        sk = cls(LazySketchSpec(depth=2, width=16, horizon=40, eps=1.0, delta=1e-6,
                                counter=counter, columns_per_tick=cpt), Z)
        rng = np.random.default_rng(0)
        sk.update_batch(rng.integers(0, 50, 300), np.sort(rng.integers(0, 23, 300)))
        open(f"/tmp/old_{cls.name}_{counter}_{cpt}.bin", "wb").write(sk.to_bytes())
        np.save(f"/tmp/old_{cls.name}_{counter}_{cpt}.npy", sk.noisy_matrix())
print("ok")
