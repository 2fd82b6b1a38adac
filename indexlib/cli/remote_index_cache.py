"""``remote-index-cache``: a broker's ``remote-log-index-cache`` checked against the remote objects, and with
``--repair`` the entries that are wrong removed (the broker fetches them again when it next reads them).

Each cached segment's files are held to Kafka's load-time rules (``remote_cache_corrupt``) and compared with the
object the RSM serves now (``remote_cache_stale``: the broker keeps serving its copy, across restarts, after the
object was fixed); an entry of a segment the metadata no longer lists as finished is ``remote_cache_orphan`` (info:
nothing reads it). A missing remote ``.txnindex`` is cached as an empty file, as Kafka does.

Exit codes: 0 nothing wrong (or every wrong entry removed), 1 wrong entries (not repaired), 2 input that cannot be
read, or a broker running on the log dir (``--repair`` holds its ``.lock``).
"""

from __future__ import annotations

import argparse
import json
import re
from typing import Any, TextIO

from ..format.errors import KafkaIndexError
from ..recovery.findings import ERROR, Finding, kind
from ..storage.remote_index_cache import cache_dir_of, list_cache_entries, read_cached, remove_cache_entries
from ..storage.remote_segments import read_index_objects
from ..storage.store import spec_for, store_for
from .dump.index_check import sanity_problem
from .remote_inventory import EXIT_BAD_INPUT, EXIT_CLEAN, EXIT_PROBLEMS, read_inventory

_KINDS = {".index": "offset", ".timeindex": "timestamp", ".txnindex": "transaction"}


def check_cache(args: argparse.Namespace) -> tuple[str, list[tuple[list[str], list[Finding]]], list[str]]:
    """(the cache dir, per cached segment (its files, its findings), the names that are no entry's)."""
    inventory, _, options = read_inventory(args)
    cache = cache_dir_of(args.cache)
    entries, foreign = list_cache_entries(cache)
    root = args.remote.rstrip("/")
    store = store_for(spec_for([root], options))
    checked = []
    for entry in entries:
        files = sorted(entry.files.values())
        segment = inventory.segments.get(entry.segment_id)
        if segment is None or segment.state != "COPY_SEGMENT_FINISHED" or segment.start_offset != entry.start_offset:
            state = (
                "unknown to the metadata" if segment is None else f"{segment.state}, from offset {segment.start_offset}"
            )
            found = [
                Finding(
                    "remote_cache_orphan", files[0] if files else cache, detail=f"segment {entry.segment_id}: {state}"
                )
            ]
            checked.append((files, found))
            continue
        objects = read_index_objects(store, root, args.layout, segment)
        found = []
        for suffix, path in sorted(entry.files.items()):
            problem = sanity_problem(path, entry.start_offset, suffix)
            if problem is not None:
                found.append(
                    Finding("remote_cache_corrupt", path, detail=f"{problem}; the broker fails every fetch of it")
                )
                continue
            remote = objects.data[_KINDS[suffix]]
            expected = b"" if remote is None and suffix == ".txnindex" else remote
            cached = read_cached(path)
            if expected is None:
                continue  # the object itself is missing: verify-remote's finding, not the cache's
            if cached != expected:
                found.append(
                    Finding(
                        "remote_cache_stale", path, expected=len(expected), found=len(cached),
                        detail=f"differs from {objects.uris[_KINDS[suffix]]} ({len(cached)} bytes cached, "
                        f"{len(expected)} there): the broker serves this copy, not the object",
                    )
                )  # fmt: skip
        checked.append((files, found))
    return cache, checked, foreign


def run_remote_index_cache_command(args: argparse.Namespace, out: TextIO, err: TextIO, prog: str) -> int:
    try:
        cache, checked, foreign = check_cache(args)
        wrong = [(files, found) for files, found in checked if any(kind(f.kind).severity == ERROR for f in found)]
        removed = []
        if args.repair and wrong:
            removed = remove_cache_entries(cache, [path for files, _ in wrong for path in files])
    except (KafkaIndexError, OSError, re.error, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=err)
        return EXIT_BAD_INPUT
    findings = [f for _, found in checked for f in found]
    if args.as_json:
        report: dict[str, Any] = {
            "cache": cache, "entries": len(checked), "wrong": len(wrong), "removed": removed,
            "foreign": foreign, "findings": [f.to_dict() for f in findings],
        }  # fmt: skip
        json.dump(report, out, indent=1)
        out.write("\n")
    else:
        for f in findings:
            print(f"{f.kind}: {f.file}: {f.detail}", file=out)
        for path in removed:
            print(f"removed {path}", file=out)
        print(
            f"{cache}: {len(checked)} cached segments, {len(wrong)} wrong"
            + (f", {len(removed)} files removed" if args.repair else "")
            + (
                f"; {len(foreign)} other files ({', '.join(foreign[:3])}{', ...' if len(foreign) > 3 else ''})"
                if foreign
                else ""
            ),
            file=out,
        )
    if wrong and not args.repair:
        return EXIT_PROBLEMS
    return EXIT_CLEAN


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--cache", required=True, metavar="DIR",
        help="the broker's remote-log-index-cache dir, or the log dir holding it (its first log dir)",
    )  # fmt: skip
    parser.add_argument(
        "--repair", action="store_true",
        help="remove every file of each stale or corrupt entry (the broker must be stopped: its .lock is taken)",
    )  # fmt: skip
