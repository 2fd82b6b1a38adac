"""The options both command lines take, declared once: ``python -m indexlib`` (:mod:`indexlib.cli.main`) and
``kafka-index`` (``jobs.cli``) add them to their parsers with these functions, so an option's name, type,
destination and help never differ between the two. What a command line does with a value stays its own
(``kafka-index`` layers the index settings over its config files; ``python -m indexlib`` uses them as given).

Destinations: ``server_properties``, ``topic_config``, ``cluster_metadata``, ``topics``, ``partitions``, ``quiet``, ``verbose``, ``broker_id``, ``index_interval_bytes``, ``segment_index_bytes``, ``run_id``, ``backup_dir``, ``sync``, ``force``,
``output_dir``, ``json_file`` (the report's file, ``-`` for stdout), ``as_json`` (dump and lookup print JSON),
``files``, ``deep_iteration``, ``print_data_log``, ``payload_format``, ``max_bytes``, ``decoder``, ``check`` (dump), ``segment``, ``offset``, ``timestamp``, ``ceiling`` (lookup)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from ..engine.options import SYNC_METHODS
from ..recovery.settings import IndexSettings

Runner = Callable[[argparse.Namespace], int]
#: ``argparse``'s sub-parsers object (``add_subparsers()``); its class is private to argparse
Commands = Any


def add_index_settings(parser: argparse.ArgumentParser, defaults: IndexSettings | None) -> None:
    """``--index-interval-bytes`` and ``--segment-index-bytes``: with ``defaults`` their defaults, else
    ``None`` (the command line's config decides). Not checked here: the command line checks them with
    :func:`indexlib.recovery.settings.check_index_setting` and reports its own way."""
    for name, kafka_name in (
        ("index_interval_bytes", "index.interval.bytes"),
        ("segment_index_bytes", "segment.index.bytes"),
    ):
        default = None if defaults is None else getattr(defaults, name)
        parser.add_argument(
            f"--{name.replace('_', '-')}",
            type=int,
            default=default,
            metavar="N",
            help=f"the topics' {kafka_name}" + ("" if default is None else " (default %(default)s)"),
        )


def add_settings_files(parser: argparse.ArgumentParser) -> None:
    """``--server-properties`` and ``--topic-config``: the files index settings come from
    (:mod:`indexlib.cli.settings_files`)."""
    parser.add_argument(
        "--server-properties", metavar="FILE", help="a broker's server.properties (log.dirs, index settings)"
    )
    parser.add_argument("--topic-config", metavar="FILE", help="JSON/YAML: topic -> Kafka topic configs")
    parser.add_argument(
        "--cluster-metadata",
        metavar="DIR",
        help="KRaft's metadata (a __cluster_metadata-0 dir, or the log dir holding it) for the topics' configs and "
        "the dynamic broker defaults (default: found in the log dirs or metadata.log.dir; none: not read)",
    )


def add_selection(parser: argparse.ArgumentParser) -> None:
    """``--topics`` and ``--partitions``: which partitions of the log dirs a run reads
    (:func:`indexlib.storage.parse_topic_filter`, :func:`indexlib.storage.parse_partition_filter`)."""
    parser.add_argument("--topics", metavar="REGEX", help="only topics whose whole name matches this regex")
    parser.add_argument("--partitions", metavar="LIST", help="only these partition numbers, e.g. 0,3,5-7")


def add_storage_options(parser: argparse.ArgumentParser) -> None:
    """``--storage-option KEY=VALUE`` (repeatable): credentials and endpoint of log dirs in object storage."""
    parser.add_argument(
        "--storage-option",
        action="append",
        metavar="KEY=VALUE",
        help="for log dirs in object storage (s3://, gs://, abfs://): a storage option, as the audit table takes "
        "them (repeatable; e.g. AWS_ENDPOINT_URL=http://host:9000, AWS_ALLOW_HTTP=true); the AWS_*, GOOGLE_* and "
        "AZURE_* environment variables work too",
    )


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    """``-q`` and ``-v`` (``quiet``, ``verbose``), one at most: :func:`report_level` turns them into the report's level."""
    loud = parser.add_mutually_exclusive_group()
    loud.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="print only failures, the error findings that remain (one line each) and the verdict line; no progress",
    )
    loud.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also the time of each phase (and for a Spark run, Spark's warnings)",
    )


def report_level(args: argparse.Namespace) -> str:
    """The level :func:`indexlib.cli.report.print_report` prints at: ``quiet``, ``verbose`` or ``normal``."""
    return "quiet" if args.quiet else "verbose" if args.verbose else "normal"


def add_run_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--run-id",
        metavar="ID",
        help="the run's id (default: generated); it names the backup dir and the audit rows, so a writing "
        "run's id whose backup dir holds files is refused",
    )


def add_jobs(parser: argparse.ArgumentParser) -> None:
    """``--jobs N``: the local process pool's size (``python -m indexlib``; ``kafka-index --engine local``)."""
    parser.add_argument(
        "--jobs",
        type=int,
        default=os.cpu_count() or 1,
        metavar="N",
        help="segments processed at once, each in its own process (default: the cores, %(default)s)",
    )


def add_write_options(parser: argparse.ArgumentParser, mode: str) -> None:
    """What a writing run (``rebuild``, ``repair``, ``recover``) takes: ``--backup-dir``; ``--force`` but for a
    recover (which takes ``--dry-run`` instead); for a rebuild ``--output-dir``."""
    parser.add_argument(
        "--backup-dir",
        metavar="DIR",
        help="copy each replaced file here first, under DIR/<run id>/<topic>-<partition>/",
    )
    parser.add_argument(
        "--sync",
        choices=SYNC_METHODS,
        default="auto",
        help="how the run makes what it writes durable: auto (the default) is syncfs when the run holds the broker "
        "lock of every log dir it writes (the broker is stopped) or writes only to an output dir, on Linux 5.17 or "
        "later, else fsync; fsync: an fsync of each file and dir; syncfs: one per file system (ext4, xfs, btrfs, "
        "tmpfs; much faster over many small files; it also writes out whatever else waits to be written there). "
        "The report and audit rows say which was used",
    )
    if mode == "recover":  # never beside a running broker: it has the files open and would write them again
        parser.add_argument(
            "--dry-run", action="store_true", help="report what it would recover, cut, drop and roll; write nothing"
        )
        return
    parser.add_argument(
        "--force", action="store_true", help="write in place even though the log dir's .lock is held (a broker)"
    )
    if mode == "rebuild":
        parser.add_argument(
            "--output-dir",
            metavar="DIR",
            help="write into DIR/<topic>-<partition>/ and only read the log dirs (DIR may be a new prefix in "
            "object storage, s3://bucket/prefix)",
        )


def add_not_yet_tiered(parser: argparse.ArgumentParser) -> None:
    """``--not-yet-tiered`` and ``--remote-log-metadata`` (``not_yet_tiered``, ``remote_log_metadata``): verify
    only the local segments tiered storage has yet to copy."""
    parser.add_argument(
        "--not-yet-tiered",
        action="store_true",
        help="only the segments of tiered topics that tiered storage has not copied yet (above each partition's "
        "highest remote end offset in __remote_log_metadata): a corrupt index is found before the broker uploads "
        "it, which Kafka does without checking it",
    )
    parser.add_argument(
        "--remote-log-metadata",
        action="append",
        default=[],
        metavar="DIR",
        help="with --not-yet-tiered: a log dir holding __remote_log_metadata-N partitions, when the run's own log "
        "dirs hold none (repeatable)",
    )


def add_broker_id(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--broker-id",
        type=int,
        metavar="N",
        help="the broker a log dir without meta.properties belongs to (refused if a meta.properties names another)",
    )


def add_json_report(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        metavar="FILE",
        dest="json_file",
        help="also write the full report as JSON to FILE (- for stdout; the text report then goes to stderr)",
    )


def add_dump_command(commands: Commands, run: Runner, **parser_options: Any) -> argparse.ArgumentParser:
    """The ``dump`` subcommand: index entries, a ``.log``'s batches and records (``kafka-dump-log.sh``'s options,
    spelled as it spells them), a producer snapshot's producers, a checkpoint's entries, or ``--check`` of them."""
    text = "print index entries, a .log's batches and records, a .snapshot or a checkpoint, or --check them (read-only)"
    dump: argparse.ArgumentParser = commands.add_parser(
        "dump",
        help=text,
        description="Print the entries of a .index, .timeindex or .txnindex (absolute offsets), the batches "
        "(and with --deep-iteration the records) of a .log or the producers of a .snapshot, as kafka-dump-log.sh "
        "does, or the entries of a leader-epoch-checkpoint or a log dir's offset checkpoint; or --check them. "
        "Read-only. Exit 0 clean, 1 a file has problems or fails --check, 2 a file cannot be dumped.",
        **parser_options,
    )
    dump.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="<20-digit base offset>.{index,timeindex,txnindex,log,snapshot}, leader-epoch-checkpoint, "
        "{recovery-point,log-start,replication,cleaner}-offset-checkpoint",
    )
    dump.add_argument("--json", action="store_true", dest="as_json", help="print JSON instead of text")
    add_storage_options(dump)
    dump.add_argument(
        "--deep-iteration", action="store_true", help="also each record of a .log: offset, timestamp, sizes, headers"
    )
    dump.add_argument(
        "--print-data-log",
        action="store_true",
        help="also each record's key, value and header values (implies --deep-iteration)",
    )
    dump.add_argument(
        "--payload-format",
        choices=("text", "hex", "base64"),
        default="text",
        help="how --print-data-log shows keys and values (default %(default)s: UTF-8)",
    )
    dump.add_argument(
        "--max-bytes",
        type=int,
        metavar="N",
        help="read only the first N bytes of a .log: the batches that end within them",
    )
    decoders = dump.add_mutually_exclusive_group()
    decoders.add_argument(
        "--offsets-decoder",
        action="store_const",
        const="offsets",
        dest="decoder",
        help="decode __consumer_offsets keys and values (implies --print-data-log)",
    )
    decoders.add_argument(
        "--transaction-log-decoder",
        action="store_const",
        const="transaction-log",
        dest="decoder",
        help="decode __transaction_state keys and values (implies --print-data-log)",
    )
    decoders.add_argument(
        "--cluster-metadata-decoder",
        action="store_const",
        const="cluster-metadata",
        dest="decoder",
        help="decode the records of KRaft's __cluster_metadata log and snapshots (implies --print-data-log)",
    )
    decoders.add_argument(
        "--remote-log-metadata-decoder",
        action="store_const",
        const="remote-log-metadata",
        dest="decoder",
        help="decode the records of __remote_log_metadata, tiered storage's segment metadata "
        "(implies --print-data-log)",
    )
    dump.add_argument(
        "--check",
        action="store_true",
        help="check index files (Kafka's load-time sanity rules, and verify's checks when the .log is beside), "
        "snapshots and checkpoints (whether Kafka reads them, and verify's checks of them)",
    )
    dump.set_defaults(run=run)
    return dump


def add_remote_inventory_command(commands: Commands, run: Runner, **parser_options: Any) -> argparse.ArgumentParser:
    """The ``remote-inventory`` subcommand: tiered storage's segments from ``__remote_log_metadata``, and their
    objects against a listing of the remote store."""
    from ..storage.remote_layout import PROBLEM_KINDS
    from .remote_inventory import add_arguments

    text = "list tiered storage's segments from __remote_log_metadata, and reconcile them with the bucket (read-only)"
    inventory: argparse.ArgumentParser = commands.add_parser(
        "remote-inventory",
        help=text,
        description="Read __remote_log_metadata offline from broker log dirs and list each remote segment at its "
        "latest state, per partition; with --remote and --layout, reconcile them with a listing of the bucket or "
        "dir the RemoteStorageManager writes (missing objects, orphans, copies and deletes not finished). "
        "Read-only. Exit 0 nothing wrong, 1 problems, 2 input that cannot be read.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        **parser_options,
    )
    add_arguments(inventory)
    add_storage_options(inventory)
    inventory.epilog = "problems:\n" + "\n".join(f"  {k}: {v}" for k, v in PROBLEM_KINDS.items())
    inventory.set_defaults(run=run)
    return inventory


def add_verify_remote_command(commands: Commands, run: Runner, **parser_options: Any) -> argparse.ArgumentParser:
    """The ``verify-remote`` subcommand: tiered segments' index objects checked where the RSM wrote them."""
    from .remote_inventory import add_arguments

    text = "check tiered segments' index objects where the RemoteStorageManager wrote them (read-only)"
    verify: argparse.ArgumentParser = commands.add_parser(
        "verify-remote",
        help=text,
        description="Plan from __remote_log_metadata (read offline from broker log dirs) and check each finished "
        "remote segment's index objects where the RSM wrote them, without reading its .log: Kafka's rules for "
        "each index, and the indexes, producer snapshot and leader-epoch blob against the segment's metadata "
        "(offsets, size, largest timestamp, leader epochs, the transaction-index-empty flag); an Aiven manifest "
        "against its objects. Read-only. Exit 0 clean, 1 findings, 2 input that cannot be read.",
        **parser_options,
    )
    add_arguments(verify, remote_required=True)
    verify.add_argument(
        "--full",
        action="store_true",
        help="also read each segment's .log (the whole object) and hold every index, the transaction index, the "
        "producer snapshot and the epoch blob to it, as verify does a local segment",
    )
    verify.add_argument(
        "--jobs",
        type=int,
        default=8,
        metavar="N",
        help="segments read at once (default 8: the reads wait on the store; on Spark, in each task)",
    )
    add_storage_options(verify)
    verify.set_defaults(run=run)
    return verify


def add_rebuild_remote_command(commands: Commands, run: Runner, **parser_options: Any) -> argparse.ArgumentParser:
    """The ``rebuild-remote`` subcommand: rebuilt index objects of damaged tiered segments, to a staging prefix."""
    from .remote_inventory import add_arguments

    text = "rebuild the index objects of tiered segments whose indexes are wrong, into a staging dir or prefix"
    rebuild: argparse.ArgumentParser = commands.add_parser(
        "rebuild-remote",
        help=text,
        description="Verify each finished remote segment in full (its .log read) and, for each whose stored "
        "indexes are not their rebuild's, write the rebuilt index objects under --output-uri at the keys its "
        "layout gives them (Aiven: a new .indexes and its manifest). Live objects are never written: swapping "
        "them in, and purging every broker's remote-log-index-cache, are the README's manual steps. Exit 0 done, "
        "1 a segment that needs it could not be rebuilt, 2 input that cannot be used.",
        **parser_options,
    )
    add_arguments(rebuild, remote_required=True)
    rebuild.add_argument(
        "--output-uri", required=True, metavar="URI", help="a new, empty dir or prefix for the rebuilt objects"
    )
    rebuild.add_argument("--jobs", type=int, default=8, metavar="N", help="segments read at once (default 8)")
    add_storage_options(rebuild)
    rebuild.set_defaults(run=run)
    return rebuild


def add_remote_index_cache_command(
    commands: Commands, run: Runner, **parser_options: Any
) -> argparse.ArgumentParser:  # fmt: skip
    """The ``remote-index-cache`` subcommand: a broker's ``remote-log-index-cache`` against the remote objects."""
    from .remote_index_cache import add_cache_arguments
    from .remote_inventory import add_arguments

    text = "check a broker's remote-log-index-cache against the remote objects, and --repair it (broker stopped)"
    cache: argparse.ArgumentParser = commands.add_parser(
        "remote-index-cache",
        help=text,
        description="Hold each cached remote index of a broker's remote-log-index-cache to Kafka's load-time rules "
        "and compare it with the object the RSM serves now (a broker serves its cached copy, across restarts, "
        "after the object was fixed); --repair removes every file of each stale or corrupt entry, holding the log "
        "dir's .lock (the broker must be stopped). Exit 0 nothing wrong (or repaired), 1 wrong entries, 2 input "
        "that cannot be read or a running broker.",
        **parser_options,
    )
    add_cache_arguments(cache)
    add_arguments(cache, remote_required=True)
    add_storage_options(cache)
    cache.set_defaults(run=run)
    return cache


def add_lookup_command(commands: Commands, run: Runner, **parser_options: Any) -> argparse.ArgumentParser:
    """The ``lookup`` subcommand: an offset or a timestamp found through a segment's indexes."""
    lookup: argparse.ArgumentParser = commands.add_parser(
        "lookup",
        help="find an offset or timestamp through a segment's indexes, as a broker's fetch would",
        description="The index entry a broker's fetch would use for an offset or a timestamp, and the exact "
        "batch found by scanning the .log from there. Read-only.",
        **parser_options,
    )
    lookup.add_argument("--segment", required=True, metavar="PATH.log", help="the segment's .log")
    target = lookup.add_mutually_exclusive_group(required=True)
    target.add_argument("--offset", type=int, metavar="N", help="find the batch holding this offset")
    target.add_argument("--timestamp", type=int, metavar="MS", help="find the first batch with a timestamp >= MS")
    lookup.add_argument("--ceiling", action="store_true", help="use the smallest entry at or above the target")
    lookup.add_argument("--json", action="store_true", dest="as_json", help="print JSON instead of text")
    lookup.set_defaults(run=run)
    return lookup
