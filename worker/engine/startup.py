"""What ``dpstream run`` refuses at start-up, in one function ``validate`` calls too.

:func:`startup_checks` is the single place of every check a worker makes before
it contacts a broker: the topics the topologies use do not collide (and not with
the checkpoint topic), each input topic's budget holds (``input.budget``,
sequential composition), the production rules and the noise sigma of every
topology's mechanism fit its sampler's range (the mechanism is built once with
the topology's own noise source, as the engine builds it for a shard's first
event), and the worst-case state fits ``DPSTREAM_MEMORY_LIMIT_BYTES``
(:mod:`worker.engine.memory_model`). :func:`load_checked` loads the mechanisms
and topology files first. ``dpstream validate`` (:mod:`worker.cli.plan`) and the
worker factory (:func:`worker.runtime.worker.create_worker`) both call
:func:`load_checked`, so validate's verdict is run's, with the same message.
"""

from __future__ import annotations

from collections.abc import Sequence

from sketches.errors import SpecError
from worker.config.mechanism_loader import load_mechanisms
from worker.config.settings import Settings
from worker.config.topology import Topology, check_topics, load_topologies
from worker.engine.composition import compose
from worker.engine.memory_model import check_memory_limit


def check_samplers(topologies: Sequence[Topology]) -> None:
    """Build each topology's mechanism with its own noise source (one shard's worth).

    A sigma outside the integer sampler's range, or a noise kind the topology may
    not use, raises here, at start-up, instead of at the first event of a shard.
    The message is prefixed with the topology file.
    """
    from sketches import lookup, make_noise

    for t in topologies:
        entry = lookup(t.mechanism)
        try:
            noise = make_noise(t.noise.kind, t.noise.seed if t.noise.kind == "fast" else None,
                               allow_insecure=t.noise.allow_insecure_noise)
            entry.build(entry.build_spec(t.spec_params()), noise)
        except (SpecError, ValueError) as exc:
            raise SpecError(f"{t.source}: {exc}") from None


def startup_checks(topologies: Sequence[Topology], settings: Settings) -> list[Topology]:
    """Every start-up check of a worker on loaded ``topologies`` (see the module
    docstring); returns them composed (each carrying its topic total).

    Raises
    ------
    SpecError
        The first check that fails, in one line naming the file or setting and the fix.
    """
    check_topics(topologies, settings.checkpoint_topic)
    # topologies reading one input topic compose: totals, budgets, stated in releases
    composed = compose(topologies)
    check_samplers(composed)
    check_memory_limit(composed, settings.memory_limit_bytes, settings.max_open_shards)
    return composed


def load_checked(settings: Settings, topology_paths: Sequence[str] | None = None
                 ) -> list[Topology]:
    """Load the plugin mechanisms and the topologies (``topology_paths``, else
    ``settings.topologies``) and run :func:`startup_checks` on them."""
    load_mechanisms(settings.plugins)
    topologies = load_topologies(topology_paths or settings.topologies)
    return startup_checks(topologies, settings)
