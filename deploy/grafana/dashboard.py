"""The dpstream Grafana dashboard, built with Grafana's own grafana-foundation-sdk.

``python deploy/grafana/dashboard.py`` prints the dashboard JSON;
``python deploy/generate.py`` writes it to deploy/grafana/dpstream.json and the
copies the Helm chart and the kustomize manifests ship (a test checks that the
committed files equal this output).

The SDK build is pinned in pyproject.toml (extra ``deploy``) to the one for
Grafana 11.6, the version deploy/compose runs: the registry's default build
targets Grafana 10.1.

Every panel reads the worker's raw metrics (docs/OPERATIONS.md "Metrics"), which
are exact, private data: this dashboard is for operators only, never for the
people the releases are for. Every query is filtered by the ``job`` and
``instance`` variables (the Prometheus scrape job and target: one worker or all),
and the topology ones also by ``topology``; the "Process" row shows the standard
``process_*``/``python_gc_*`` metrics beside the sketch memory model.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import (
    bargauge,
    dashboard,
    stat,
    table,
    timeseries,
)
from grafana_foundation_sdk.builders import prometheus as prom
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    VariableRefresh,
)

GRAFANA_VERSION = "11.6"
UID = "dpstream"
DS = DataSourceRef(type_val="prometheus", uid="${datasource}")
JI = 'job=~"$job", instance=~"$instance"'
SEL = f'{JI}, topology=~"$topology"'
RATE = "$__rate_interval"


def _q(expr: str, legend: str, ref: str = "A", instant: bool = False) -> prom.Dataquery:
    q = prom.Dataquery().expr(expr).legend_format(legend).ref_id(ref).datasource(DS)
    return q.instant() if instant else q.range()


def _ts(title: str, unit: str, desc: str, *queries: prom.Dataquery,
        w: int = 12, h: int = 8) -> timeseries.Panel:
    p = (timeseries.Panel().title(title).description(desc).unit(unit).datasource(DS)
         .span(w).height(h).fill_opacity(10).line_width(1).min(0))
    for q in queries:
        p = p.with_target(q)
    return p


def _hq(metric: str, q: float) -> str:
    return (f"histogram_quantile({q}, sum by (topology, le) "
            f"(rate({metric}_bucket{{{SEL}}}[{RATE}])))")


def _rare(metric: str, by: str = "topology") -> str:
    """Rate of a rare counter, 0 per topology while it has no series (no "No data")."""
    return (f"sum by ({by}) (rate({metric}{{{SEL}}}[{RATE}])) "
            f"or on (topology) (0 * sum by (topology) (dpstream_messages_in_total{{{SEL}}}))")


def build() -> dict[str, Any]:
    """The dashboard as a JSON-ready dict."""
    ds_var = (dashboard.DatasourceVariable("datasource").label("Prometheus")
              .type("prometheus"))
    job_var = _var("job", "Job", "label_values(dpstream_worker_ready, job)")
    inst_var = _var("instance", "Instance",
                    'label_values(dpstream_worker_ready{job=~"$job"}, instance)')
    topo_var = _var("topology", "Topology",
                    f"label_values(dpstream_events_in_total{{{JI}}}, topology)")
    d = (dashboard.Dashboard("dpstream")
         .uid(UID)
         .description("dpstream workers: throughput, latency, lag, releases, checkpoints "
                      "and the privacy picture. Operator-only: worker metrics are exact, "
                      "private data.")
         .tags(["dpstream", "kafka", "differential-privacy"])
         .time("now-30m", "now").refresh("30s").timezone("browser")
         .tooltip(DashboardCursorSync.CROSSHAIR)
         .with_variable(ds_var).with_variable(job_var).with_variable(inst_var)
         .with_variable(topo_var))

    d = d.with_row(dashboard.Row("Throughput and latency"))
    d = d.with_panel(_ts(
        "Throughput", "ops", "Events applied to sketches and input messages read, per second.",
        _q(f"sum by (topology) (rate(dpstream_events_in_total{{{SEL}}}[{RATE}]))",
           "{{topology}} events", "A"),
        _q(f"sum by (topology) (rate(dpstream_messages_in_total{{{SEL}}}[{RATE}]))",
           "{{topology}} messages", "B")))
    d = d.with_panel(_ts(
        "Batch latency", "s", "Decode + route + update time per batch (p50, p99).",
        _q(_hq("dpstream_batch_duration_seconds", 0.5), "{{topology}} p50", "A"),
        _q(_hq("dpstream_batch_duration_seconds", 0.99), "{{topology}} p99", "B")))
    d = d.with_panel(_ts(
        "Consumer lag per partition", "short",
        "High watermark minus position per input partition. Growing lag: add workers to "
        "the group, up to the partition count.",
        _q(f"max by (topology, partition) (dpstream_consumer_lag_messages{{{SEL}}})",
           "{{topology}} p{{partition}}")))
    d = d.with_panel(_ts(
        "Release latency", "s",
        "From the oldest unreleased event's ingestion to its release being published.",
        _q(_hq("dpstream_release_latency_seconds", 0.5), "{{topology}} p50", "A"),
        _q(_hq("dpstream_release_latency_seconds", 0.99), "{{topology}} p99", "B")))

    d = d.with_row(dashboard.Row("Releases and input quality"))
    d = d.with_panel(_ts(
        "Releases per shard", "ops", "Releases published per second, per shard.",
        _q(f"sum by (topology, shard) (rate(dpstream_releases_published_total{{{SEL}}}"
           f"[{RATE}]))", "{{topology}}/{{shard}}"), w=8))
    d = d.with_panel(_ts(
        "Dead letters by reason", "ops",
        "Records sent to the dead-letter topic per second (raw input: operator-only).",
        _q(_rare("dpstream_dead_letters_total", "topology, reason"),
           "{{topology}} {{reason}}"), w=8))
    d = d.with_panel(_ts(
        "Dropped: unit cap and event horizon", "ops",
        "Events dropped by the per-unit contribution cap, and events over the public "
        "per-epoch event horizon (non-zero: that epoch is outside the stated guarantee).",
        _q(_rare("dpstream_contributions_dropped_total"), "{{topology}} unit cap", "A"),
        _q(_rare("dpstream_events_over_horizon_total"), "{{topology}} over horizon", "B"),
        w=8))

    d = d.with_row(dashboard.Row("State and checkpoints"))
    d = d.with_panel(_ts(
        "Sketch memory", "bytes", "Bytes of sketch state per topology and shard.",
        _q(f"sum by (topology, shard) (dpstream_sketch_memory_bytes{{{SEL}}})",
           "{{topology}}/{{shard}}"), w=8))
    d = d.with_panel(_ts(
        "Checkpoint bytes written", "Bps", "Compressed checkpoint bytes written per second.",
        _q(f"sum by (topology) (rate(dpstream_checkpoint_written_bytes_total{{{SEL}}}"
           f"[{RATE}]))", "{{topology}}"), w=8))
    d = d.with_panel(_ts(
        "Checkpoint latency", "s", "Write + acknowledge time per checkpoint (p50, p99).",
        _q(_hq("dpstream_checkpoint_duration_seconds", 0.5), "{{topology}} p50", "A"),
        _q(_hq("dpstream_checkpoint_duration_seconds", 0.99), "{{topology}} p99", "B"),
        w=8))

    d = d.with_row(dashboard.Row("Privacy and workers"))
    d = d.with_panel(
        table.Panel().title("Privacy per topology").datasource(DS).span(12).height(8)
        .description("Stated guarantee per epoch (LazyHH: delta_tilde) and the semantics: "
                     "relation, unit, cap, clock, noise.")
        .with_target(_q(f"max by (topology) (dpstream_privacy_epsilon_per_epoch{{{SEL}}})",
                        "eps", "A", instant=True).format(_table_format()))
        .with_target(_q(f"max by (topology) (dpstream_privacy_delta_per_epoch{{{SEL}}})",
                        "delta", "B", instant=True).format(_table_format()))
        .with_target(_q(f"max by (topology, mechanism, relation, unit, unit_cap, clock, noise)"
                        f" (dpstream_privacy_info{{{SEL}}})", "info", "C",
                        instant=True).format(_table_format())))
    d = d.with_panel(
        bargauge.Panel().title("Epoch progress").datasource(DS).span(6).height(8)
        .description("Closed rounds of the current epoch over rounds per epoch.")
        .unit("percentunit").min(0).max(1)
        .with_target(_q(f"max by (topology) (dpstream_epoch_progress_rounds{{{SEL}}}) / "
                        f"max by (topology) (dpstream_epoch_length_rounds{{{SEL}}})",
                        "{{topology}}", instant=True)))
    d = d.with_panel(
        stat.Panel().title("Workers ready").datasource(DS).span(6).height(8)
        .description("Workers whose /readyz passes (connected, partitions restored, not "
                     "rebalancing) and shards owned.")
        .with_target(_q(f"sum(dpstream_worker_ready{{{JI}}})", "ready", "A", instant=True))
        .with_target(_q(f"sum(dpstream_shards_owned{{{SEL}}})", "shards owned", "B",
                        instant=True)))
    d = d.with_panel(_ts(
        "Epoch", "none", "Current epoch number per topology (budgets renew per epoch).",
        _q(f"max by (topology) (dpstream_epoch{{{SEL}}})", "{{topology}}"), w=24, h=6))

    d = d.with_row(dashboard.Row("Process"))
    d = d.with_panel(_ts(
        "Memory: RSS and sketch model", "bytes",
        "Resident memory of each worker process next to the sketch state the memory model "
        "accounts for (docs/OPERATIONS.md \"Memory model\"); the gap is the interpreter, "
        "client buffers and batches in flight.",
        _q(f"sum by (instance) (process_resident_memory_bytes{{{JI}}})",
           "{{instance}} RSS", "A"),
        _q(f"sum by (instance) (dpstream_sketch_memory_bytes{{{JI}}})",
           "{{instance}} sketch model", "B"), w=6))
    d = d.with_panel(_ts(
        "CPU", "percentunit", "CPU time per second of each worker process (1 = one core).",
        _q(f"sum by (instance) (rate(process_cpu_seconds_total{{{JI}}}[{RATE}]))",
           "{{instance}}"), w=6))
    d = d.with_panel(_ts(
        "Open file descriptors", "short", "Open file descriptors and the process limit.",
        _q(f"sum by (instance) (process_open_fds{{{JI}}})", "{{instance}} open", "A"),
        _q(f"sum by (instance) (process_max_fds{{{JI}}})", "{{instance}} limit", "B"), w=6))
    d = d.with_panel(_ts(
        "Python GC", "ops", "Garbage-collector runs and objects collected per second, per "
        "generation (long gen-2 runs pause ingestion).",
        _q(f"sum by (instance, generation) (rate(python_gc_collections_total{{{JI}}}"
           f"[{RATE}]))", "{{instance}} gen{{generation}} runs", "A"),
        _q(f"sum by (instance, generation) (rate(python_gc_objects_collected_total{{{JI}}}"
           f"[{RATE}]))", "{{instance}} gen{{generation}} objects", "B"), w=6))
    out: dict[str, Any] = json.loads(json.dumps(d.build(), cls=JSONEncoder))
    for i, panel in enumerate(out["panels"], 1):  # Grafana wants unique panel ids
        panel["id"] = i
    return out


def _var(name: str, label: str, query: str) -> dashboard.QueryVariable:
    """A multi-value query variable with "All" meaning any value (``.*``)."""
    return (dashboard.QueryVariable(name).label(label).datasource(DS).query(query)
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED)
            .multi(True).include_all(True).all_value(".*"))


def _table_format() -> Any:
    from grafana_foundation_sdk.models.prometheus import PromQueryFormat

    return PromQueryFormat.TABLE


def render() -> str:
    """The dashboard JSON exactly as committed (sorted keys, 2-space indent, newline)."""
    return json.dumps(build(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(render(), end="")
