"""Old (pre-c79769e, written at 6cbd81e) LazyCMS/LazyCS states restore unchanged: same spec
(no round_ticks), same release, same continuation as a fresh per-tick sketch."""
import numpy as np

from sketches.continual.lazy import LazyCMS, LazyCS
from sketches.core.noise import make_noise

Z = make_noise("zero", allow_insecure=True)
for cls in (LazyCMS, LazyCS):
    for counter, cpt in (("tree", None), ("tree", 4), ("blt_int", None)):
        name = f"/tmp/old_{cls.name}_{counter}_{cpt}"
        data = open(name + ".bin", "rb").read()
        sk = cls.from_bytes(data, Z)
        ok = (sk.spec.round_ticks is None
              and np.array_equal(sk.noisy_matrix(), np.load(name + ".npy"))
              and sk.to_bytes() == data)
        sk.advance_to(40)
        print(cls.name, counter, cpt, "restored unchanged:", ok, "rounds", sk.rounds)
