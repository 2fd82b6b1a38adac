"""Whose log dirs a run reads: each log dir's broker identity (cluster id, broker id, directory id) from its
``meta.properties``, or from ``--broker-id`` for a log dir that has none, and the findings a log dir without a
readable one gets (``no_meta_properties``, info; ``bad_meta_properties``, an error: Kafka refuses to start
on it). Every segment task, report line, ``--json`` record and audit row carries its log dir's identity."""

from __future__ import annotations

from ..format.meta_properties import BrokerIdentity
from ..recovery.findings import Finding
from ..storage import Discovery, LogDirMeta, read_log_dir_meta, remote_store

BROKER_ID_MAX = 2**31 - 1


def run_log_dirs(discovery: Discovery) -> list[str]:
    """Every log dir of a run: those searched, and those of the partitions given by their path."""
    dirs = list(dict.fromkeys(discovery.log_dirs))
    return dirs + [d for d in dict.fromkeys(p.log_dir for p in discovery.partitions) if d not in dirs]


def broker_id_conflicts(discovery: Discovery, broker_id: int) -> list[str]:
    """The log dirs whose ``meta.properties`` names another broker than ``broker_id`` (``--broker-id``): the
    run was pointed at another broker's disk. One message per log dir."""
    conflicts = []
    store = remote_store(discovery.store)
    for log_dir in run_log_dirs(discovery):
        meta = read_log_dir_meta(log_dir, store)
        named = meta.identity.broker_id
        if named is not None and named != broker_id:
            conflicts.append(f"{meta.path} names broker {named}, not --broker-id {broker_id}")
    return conflicts


def resolve(meta: LogDirMeta, broker_id: int | None) -> BrokerIdentity:
    """A log dir's identity: its ``meta.properties``', else the broker ``--broker-id`` names."""
    if meta.problem is None or broker_id is None:
        return meta.identity
    return BrokerIdentity(None, broker_id, None)


def meta_finding(meta: LogDirMeta, broker_id: int | None) -> Finding | None:
    """The finding of a log dir whose ``meta.properties`` is missing or unusable, else None."""
    if meta.problem is None:
        return None
    named = f"; named broker {broker_id} by --broker-id" if broker_id is not None else "; give --broker-id to name it"
    kind = "no_meta_properties" if meta.problem == "missing" else "bad_meta_properties"
    return Finding(kind, meta.path, detail=meta.detail + named)


def log_dir_identities(discovery: Discovery, broker_id: int | None) -> list[BrokerIdentity]:
    """The identities of a run's log dirs (each once): whose rows a run writes."""
    return list(dict.fromkeys(identities(discovery, broker_id)[0].values()))


def identities(
    discovery: Discovery, broker_id: int | None
) -> tuple[dict[str, BrokerIdentity], dict[str, list[Finding]]]:
    """Each log dir's identity, and the log dirs' findings (keyed by log dir)."""
    brokers: dict[str, BrokerIdentity] = {}
    findings: dict[str, list[Finding]] = {}
    store = remote_store(discovery.store)
    for log_dir in run_log_dirs(discovery):
        meta = read_log_dir_meta(log_dir, store)
        brokers[log_dir] = resolve(meta, broker_id)
        if (finding := meta_finding(meta, broker_id)) is not None:
            findings[log_dir] = [finding]
    return brokers, findings
