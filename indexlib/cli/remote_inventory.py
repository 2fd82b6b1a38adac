"""``remote-inventory``: what tiered storage holds, from ``__remote_log_metadata`` read offline in broker log dirs
(no cluster, no client), each remote segment at its latest state, per partition; with ``--remote`` and
``--layout``, reconciled with a listing of the bucket or dir the RSM writes (:mod:`indexlib.storage.remote_layout`).

Exit codes: 0 nothing wrong, 1 problems (each printed, one line), 2 the input cannot be read.

Invariants: read-only (one listing of ``--remote``, the metadata's files read); topic names are the metadata's
own (its records carry them).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import TYPE_CHECKING, Any, TextIO

from ..format.errors import KafkaIndexError
from ..storage.remote_layout import LAYOUTS, Reconciliation, reconcile
from ..storage.remote_log_metadata_files import find_remote_log_metadata, read_remote_log_metadata
from ..storage.store import spec_for, store_for
from .run_planning import key_values

if TYPE_CHECKING:
    from ..format.remote_log_metadata import RemoteLogInventory

EXIT_CLEAN, EXIT_PROBLEMS, EXIT_BAD_INPUT = 0, 1, 2


class RemoteInventoryError(KafkaIndexError, ValueError):
    """Input the inventory cannot use (no metadata in the log dirs, a bad option): one line, exit 2."""


def inventory_report(args: argparse.Namespace) -> tuple[dict[str, Any], Reconciliation]:
    """(the JSON report, the reconciliation) of one ``remote-inventory`` call."""
    if (args.remote is None) != (args.layout is None):
        raise RemoteInventoryError("--remote and --layout go together")
    inventory, topics, options = read_inventory(args)
    listing = None
    if args.remote is not None:
        remote_store = store_for(spec_for([args.remote], options))
        listing = remote_store.list_tree(args.remote.rstrip("/"))
    found = reconcile(inventory, listing, args.layout or "kafka", topics)
    partitions = {
        tp: [s.to_json() for s in segments]
        for tp, segments in inventory.by_partition().items()
        if topics is None or segments[0].topic in topics
    }
    report = {
        "log_dirs": args.log_dir,
        "remote": args.remote,
        "layout": args.layout,
        "records": inventory.records,
        "partitions": partitions,
        "deleted_partitions": inventory.deleted_partitions,
        "refused_transitions": dict(inventory.refused),
        "objects": found.objects if listing is not None else None,
        "foreign_keys": found.foreign_keys if listing is not None else None,
        "problems": [p.to_json() for p in found.problems],
    }
    return report, found


def print_inventory(report: dict[str, Any], out: TextIO) -> None:
    """The text report: per partition its segments, then the problems."""
    for tp, segments in report["partitions"].items():
        finished = sum(1 for s in segments if s["state"] == "COPY_SEGMENT_FINISHED")
        size = sum(max(0, s["size"]) for s in segments if s["state"] == "COPY_SEGMENT_FINISHED")
        print(
            f"{tp} (topic id {segments[0]['topic_id']}): {finished} finished of {len(segments)} segments, {size} bytes",
            file=out,
        )
        for s in segments:
            epochs = ",".join(f"{e}@{o}" for e, o in s["leader_epochs"])
            print(
                f"  {s['start_offset']}-{s['end_offset']} {s['state']} {s['size']} bytes epochs {epochs or '-'} "
                f"broker {s['broker_id']} txn index {'empty' if s['txn_index_empty'] else 'not empty'} "
                f"id {s['segment_id']}",
                file=out,
            )
    for name, state in sorted(report["deleted_partitions"].items()):
        print(f"partition {name}: {state}", file=out)
    if report["objects"] is not None:
        print(
            f"{report['remote']} ({report['layout']} layout): {report['objects']} objects of tiered segments, "
            f"{report['foreign_keys']} other keys",
            file=out,
        )
    for p in report["problems"]:
        where = " ".join(x for x in (p["topic_partition"], p["segment_id"]) if x)
        print(f"{p['kind']}: {where + ': ' if where else ''}{p['detail']}", file=out)
    n = len(report["problems"])
    print(f"{report['records']} metadata records; {n} problem{'s' if n != 1 else ''}", file=out)


def run_remote_inventory_command(args: argparse.Namespace, out: TextIO, err: TextIO, prog: str) -> int:
    try:
        report, found = inventory_report(args)
    except (KafkaIndexError, OSError, re.error) as exc:
        print(f"{prog}: error: {exc}", file=err)
        return EXIT_BAD_INPUT
    if args.as_json:
        json.dump(report, out, indent=1)
        out.write("\n")
    else:
        print_inventory(report, out)
    return EXIT_PROBLEMS if found.problems else EXIT_CLEAN


def add_arguments(parser: argparse.ArgumentParser, remote_required: bool = False) -> None:
    """The options of ``remote-inventory`` and ``verify-remote``: the metadata's log dirs, the remote store and its
    layout, a topic filter, JSON."""
    parser.add_argument(
        "--log-dir", action="append", required=True, metavar="DIR",
        help="a broker log dir holding __remote_log_metadata-N partitions (repeatable: every broker's replicas)",
    )  # fmt: skip
    parser.add_argument(
        "--remote", metavar="URI", required=remote_required, help="where the RSM writes (a dir, or s3://bucket/prefix)"
    )
    parser.add_argument(
        "--layout", choices=LAYOUTS, required=remote_required,
        help="the RSM's layout: kafka (LocalTieredStorage) or aiven (tiered-storage-for-apache-kafka)",
    )  # fmt: skip
    parser.add_argument("--topics", metavar="REGEX", help="only topics whose whole name matches this regex")
    parser.add_argument("--json", action="store_true", dest="as_json", help="print JSON instead of text")


def read_inventory(args: argparse.Namespace) -> tuple[RemoteLogInventory, set[str] | None, dict[str, str]]:
    """(the inventory of ``--log-dir``'s metadata, the topics ``--topics`` selects (None: all), the storage
    options); :class:`RemoteInventoryError` when the log dirs hold no metadata."""
    options = key_values(args.storage_option, "--storage-option")
    log_dirs: list[str] = args.log_dir
    log_store = store_for(spec_for(log_dirs, options))
    if not find_remote_log_metadata(log_dirs, log_store):
        raise RemoteInventoryError(
            f"{', '.join(log_dirs)}: no __remote_log_metadata-N partition dir (give the log dirs of brokers that "
            "hold replicas of the remote log metadata topic)"
        )
    pattern = re.compile(args.topics) if args.topics else None
    inventory = read_remote_log_metadata(log_dirs, log_store)
    topics = None
    if pattern is not None:
        topics = {s.topic for s in inventory.segments.values() if pattern.fullmatch(s.topic)}
    return inventory, topics, options
