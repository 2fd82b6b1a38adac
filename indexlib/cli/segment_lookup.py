"""Find an offset or a timestamp through one segment's indexes, as a broker's fetch would: the index
entry used (floor, or ``ceiling``), and the exact batch found by scanning the ``.log`` from there."""

from __future__ import annotations

import json
import os
from typing import Any, TextIO

import numpy as np

from ..format.batch_walk import scan_log
from ..format.errors import FileNameError, KafkaIndexError
from ..format.layout import LOG_SUFFIX, parse_segment_name, segment_file
from ..format.offset_index import OffsetIndex
from ..format.time_index import TimeIndex

#: Kafka's offsets and timestamps are Java longs; an offset is never negative
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class LookupTargetError(KafkaIndexError, ValueError):
    """A lookup with no target, a target no segment can hold, or a segment whose files are missing."""


def check_target(offset: int | None = None, timestamp: int | None = None) -> None:
    """:class:`LookupTargetError` naming the option unless ``offset`` is an offset Kafka can hold (0 to 2^63-1) and
    ``timestamp`` a Java long."""
    if offset is not None and not 0 <= offset <= LONG_MAX:
        raise LookupTargetError(
            f"--offset {offset}: an offset is 0 to {LONG_MAX} (Kafka's offsets are non-negative longs)"
        )
    if timestamp is not None and not LONG_MIN <= timestamp <= LONG_MAX:
        raise LookupTargetError(f"--timestamp {timestamp}: a timestamp is a Java long ({LONG_MIN} to {LONG_MAX})")


def lookup(
    segment: str, offset: int | None = None, timestamp: int | None = None, ceiling: bool = False
) -> dict[str, Any]:
    """The index entries used and the exact batch found for an offset or timestamp in one segment
    (:class:`LookupTargetError` for a target no segment can hold, :func:`check_target`)."""
    check_target(offset, timestamp)
    parsed = parse_segment_name(os.path.basename(segment))
    if parsed is None or parsed[1] != LOG_SUFFIX:
        raise FileNameError(f"{segment}: not a segment file (expected <20-digit base offset>.log)")
    base = parsed[0]
    directory = os.path.dirname(segment) or "."
    needed = [segment, segment_file(directory, base, ".index")]
    if timestamp is not None:
        needed.append(segment_file(directory, base, ".timeindex"))
    for path in needed:  # name the file that is missing (an OSError's message names none)
        if not os.path.exists(path):
            raise LookupTargetError(f"{path}: no such file (a lookup reads the segment's .log and its index files)")
    scan = scan_log(segment)
    answer: dict[str, Any] = {"segment": segment, "base_offset": base}
    if timestamp is not None:
        answer["timestamp"] = timestamp
    elif offset is not None:
        answer["offset"] = offset
    with OffsetIndex(segment_file(directory, base, ".index"), base, writable=False) as index:
        if timestamp is not None:
            with TimeIndex(segment_file(directory, base, ".timeindex"), base, writable=False) as times:
                time_entry = times.lookup_ceiling(timestamp) if ceiling else times.lookup(timestamp)
            answer["timeindex_entry"] = (
                None if time_entry is None else {"timestamp": time_entry.timestamp, "offset": time_entry.offset}
            )
            target_offset = base if time_entry is None or time_entry.timestamp < 0 else time_entry.offset
        elif offset is not None:
            target_offset = offset
        else:
            raise LookupTargetError(f"{segment}: nothing to look up: give an offset or a timestamp")
        entry = index.lookup_ceiling(target_offset) if (ceiling and timestamp is None) else index.lookup(target_offset)
        answer["index_entry"] = None if entry is None else {"offset": entry.offset, "position": entry.position}
    start = entry.position if entry is not None else 0
    # A ceiling entry for an offset lies after the batch holding it: search the whole segment then.
    searched = scan.positions >= (0 if ceiling and timestamp is None else start)
    reached = scan.max_timestamps >= timestamp if timestamp is not None else scan.last_offsets >= offset
    hits = np.flatnonzero(searched & reached)
    if len(hits):
        i = int(hits[0])
        answer["batch"] = {
            "position": int(scan.positions[i]),
            "base_offset": int(scan.base_offsets[i]),
            "last_offset": int(scan.last_offsets[i]),
            "max_timestamp": int(scan.max_timestamps[i]),
            "size": int(scan.sizes[i]),
            "bytes_scanned_from_entry": int(scan.positions[i]) - start,
        }
    else:
        answer["batch"] = None
    return answer


def print_lookup(answer: dict[str, Any], as_json: bool, out: TextIO) -> int:
    """Print a :func:`lookup` answer as text or JSON; exit code 0 when a batch was found, else 1."""
    found = answer["batch"] is not None
    if as_json:
        print(json.dumps(answer, indent=2), file=out)
        return 0 if found else 1
    what = f"offset {answer['offset']}" if "offset" in answer else f"timestamp {answer['timestamp']}"
    if "timeindex_entry" in answer:
        entry = answer["timeindex_entry"]
        print(
            "time index entry: "
            + ("none" if entry is None else f"timestamp {entry['timestamp']} -> offset {entry['offset']}"),
            file=out,
        )
    entry = answer["index_entry"]
    print(
        "offset index entry: " + ("none" if entry is None else f"offset {entry['offset']} -> byte {entry['position']}"),
        file=out,
    )
    batch = answer["batch"]
    if batch is None:
        print(f"{what}: not in this segment", file=out)
        return 1
    print(
        f"{what}: batch at byte {batch['position']} (offsets {batch['base_offset']}..{batch['last_offset']}, "
        f"max timestamp {batch['max_timestamp']}, {batch['size']} bytes), "
        f"{batch['bytes_scanned_from_entry']} bytes after the index entry",
        file=out,
    )
    return 0
