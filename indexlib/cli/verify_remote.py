"""``verify-remote``: every finished segment ``__remote_log_metadata`` lists (of ``--topics``), its index objects
checked where the RSM wrote them (:mod:`indexlib.engine.remote`), without reading its ``.log``; with ``--full``,
its ``.log`` read too and every index, transaction index, snapshot and epoch blob held to it.

Exit codes: 0 no error finding, 1 error findings, 2 input that cannot be read (no metadata, a store that fails).

Invariants: read-only; one line per segment with findings (then one per finding), a summary line last.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable
from typing import Any, TextIO

from ..engine import new_run_id
from ..engine.remote import RemoteSegmentOutcome, RemoteSegmentTask, verify_remote_segments
from ..format.errors import KafkaIndexError
from ..storage.store import StoreSpec, spec_for, store_for
from .remote_inventory import EXIT_BAD_INPUT, EXIT_CLEAN, EXIT_PROBLEMS, RemoteInventoryError, read_inventory
from .settings_files import TopicSettings, load_cluster_settings


def check_output(args: argparse.Namespace, options: dict[str, str]) -> StoreSpec:
    """``--output-uri``'s store: a new, empty dir or prefix outside ``--remote`` (live objects are never written),
    else :class:`RemoteInventoryError`."""
    output, remote = args.output_uri.rstrip("/"), args.remote.rstrip("/")
    if output == remote or output.startswith(remote + "/") or remote.startswith(output + "/"):
        raise RemoteInventoryError(f"--output-uri {args.output_uri}: inside --remote {args.remote} or around it; "
                                   "rebuilt objects go to a staging prefix, never over live ones")  # fmt: skip
    spec = spec_for([output], options)
    if not store_for(spec).prefix_is_empty(output):
        raise RemoteInventoryError(f"--output-uri {args.output_uri}: not empty; give a new dir or prefix")
    return spec


def plan_remote_tasks(args: argparse.Namespace) -> list[RemoteSegmentTask]:
    """A task per ``COPY_SEGMENT_FINISHED`` segment of the selected topics, by partition and start offset; with
    ``--full``, each with its topic's index settings (the cluster's metadata beside the log dirs, else Kafka's
    defaults) and the finished segment just before it (whose snapshot is the state at its base)."""
    inventory, topics, options = read_inventory(args)
    root = args.remote.rstrip("/")
    spec = spec_for([root], options)
    output_root = getattr(args, "output_uri", None)
    output_spec = check_output(args, options) if output_root is not None else None
    full = args.full or output_root is not None
    settings = TopicSettings(cluster=load_cluster_settings(args.log_dir)) if full else TopicSettings()
    run_id = new_run_id("rebuild") if output_root is not None else ""
    tasks = []
    for segments in inventory.by_partition().values():
        finished = [s for s in segments if s.state == "COPY_SEGMENT_FINISHED"]
        for i, s in enumerate(finished):
            if topics is not None and s.topic not in topics:
                continue
            previous = finished[i - 1] if i and finished[i - 1].end_offset + 1 == s.start_offset else None
            tasks.append(
                RemoteSegmentTask(
                    spec,
                    root,
                    args.layout,
                    s,
                    args.full,
                    settings.for_topic(s.topic),
                    previous,
                    output_root.rstrip("/") if output_root else None,
                    output_spec,
                    run_id,
                )  # fmt: skip
            )
    return tasks


def outcome_json(o: RemoteSegmentOutcome) -> dict[str, Any]:
    s = o.segment
    return {
        "topic_partition": s.topic_partition, "segment_id": s.segment_id, "start_offset": s.start_offset,
        "end_offset": s.end_offset, "skipped": o.skipped, "requests": o.requests, "identical": o.identical,
        "findings": [f.to_dict() for f in o.findings], "written": o.written,
    }  # fmt: skip


def report_verify_remote(args: argparse.Namespace, outcomes: list[RemoteSegmentOutcome], out: TextIO) -> int:
    """Print ``verify-remote``'s report (text, or ``--json``); its exit code."""
    failed = [o for o in outcomes if o.failed]
    if args.as_json:
        report = {
            "remote": args.remote, "layout": args.layout, "mode": "full" if args.full else "index-only",
            "segments": len(outcomes), "failed": len(failed), "outcomes": [outcome_json(o) for o in outcomes],
        }  # fmt: skip
        json.dump(report, out, indent=1)
        out.write("\n")
    else:
        for o in outcomes:
            if o.findings or o.skipped:
                state = o.skipped or f"{len(o.findings)} finding{'s' if len(o.findings) != 1 else ''}"
                _segment_line(o, state, [f"{f.kind}: {f.file}: {f.detail}" for f in o.findings], out)
        skipped = sum(1 for o in outcomes if o.skipped)
        print(
            f"{len(outcomes)} remote segments checked ({'full' if args.full else 'index-only'}), {len(failed)} with "
            f"findings, {skipped} skipped; {sum(o.requests for o in outcomes)} reads of {args.remote}",
            file=out,
        )
    return EXIT_PROBLEMS if failed else EXIT_CLEAN


def run_verify_remote_command(args: argparse.Namespace, out: TextIO, err: TextIO, prog: str) -> int:
    """``verify-remote`` on this machine's threads (:func:`report_verify_remote`)."""
    return _run_remote(args, out, err, prog, report_verify_remote)


def _segment_line(o: RemoteSegmentOutcome, state: str, lines: list[str], out: TextIO) -> None:
    s = o.segment
    print(f"{s.topic_partition} {s.start_offset}-{s.end_offset} {s.segment_id}: {state}", file=out)
    for line in lines:
        print(f"  {line}", file=out)


def report_rebuild_remote(args: argparse.Namespace, outcomes: list[RemoteSegmentOutcome], out: TextIO) -> int:
    """Print ``rebuild-remote``'s report (text, or ``--json``); its exit code (1: a segment that needs a rebuild
    got none, its ``.log`` cannot be rebuilt from)."""
    stuck = [o for o in outcomes if o.failed and not o.written]
    if args.as_json:
        report = {
            "remote": args.remote, "layout": args.layout, "output_uri": args.output_uri, "segments": len(outcomes),
            "rebuilt": sum(1 for o in outcomes if o.written), "not_rebuilt": len(stuck),
            "outcomes": [outcome_json(o) for o in outcomes],
        }  # fmt: skip
        json.dump(report, out, indent=1)
        out.write("\n")
    else:
        for o in outcomes:
            if o.written:
                _segment_line(o, "rebuilt", [f"wrote {uri}" for uri in o.written], out)
            elif o.failed:
                _segment_line(o, "not rebuilt", [f"{f.kind}: {f.file}: {f.detail}" for f in o.findings], out)
        written = sum(len(o.written) for o in outcomes)
        print(
            f"{len(outcomes)} remote segments verified in full, {sum(1 for o in outcomes if o.written)} rebuilt "
            f"({written} objects under {args.output_uri}), {len(stuck)} not rebuilt",
            file=out,
        )
    return EXIT_PROBLEMS if stuck else EXIT_CLEAN


def run_rebuild_remote_command(args: argparse.Namespace, out: TextIO, err: TextIO, prog: str) -> int:
    """``rebuild-remote`` on this machine's threads: each finished segment verified in full; one whose stored
    indexes are not their rebuild's gets its rebuilt objects under ``--output-uri`` (:func:`report_rebuild_remote`)."""
    args.full = False
    return _run_remote(args, out, err, prog, report_rebuild_remote)


def _run_remote(
    args: argparse.Namespace, out: TextIO, err: TextIO, prog: str,
    report: Callable[[argparse.Namespace, list[RemoteSegmentOutcome], TextIO], int],
) -> int:  # fmt: skip
    try:
        tasks = plan_remote_tasks(args)
        outcomes = list(verify_remote_segments(tasks, max(1, args.jobs)))
    except (KafkaIndexError, OSError, re.error, ValueError) as exc:
        print(f"{prog}: error: {exc}", file=err)
        return EXIT_BAD_INPUT
    return report(args, outcomes, out)
