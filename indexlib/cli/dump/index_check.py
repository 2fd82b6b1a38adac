"""``dump --check FILE``: one index file held to Kafka's load-time sanity rules (kafka-index-format.md 4.1, the
index classes' ``sanity_check``) and, when its ``.log`` is beside it, to verify's checks of that file (the same
engine and checks as ``verify``: :func:`indexlib.engine.process_segment` for a ``.index`` or ``.timeindex``, the
partition's replay through :func:`indexlib.engine.verify_partition` for a ``.txnindex``).

Invariants: read-only; only findings about FILE itself are returned (a ``.log``'s own findings belong to a dump
or a verify of the ``.log``); an error-severity finding or a failed sanity rule is a finding (exit 1).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...engine import SegmentTask, process_segment, verify_partition
from ...format.errors import CorruptIndexError
from ...format.layout import parse_partition_dir_name, segment_base_offsets, segment_file
from ...format.offset_index import OffsetIndex
from ...format.time_index import TimeIndex
from ...format.transaction_index import TransactionIndex
from ...recovery.findings import ERROR, Finding, kind
from ...recovery.settings import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_SEGMENT_INDEX_BYTES
from .model import DumpUsageError, parse_segment_file_name


@dataclass
class CheckResult:
    """What ``--check`` found about one file: ``sanity`` (Kafka's rule that fails, or ``None``), verify's
    ``findings`` on the file (empty when there is no ``.log`` to check it against) and why verify did not run."""

    file: str
    sanity: str | None = None
    findings: list[Finding] = field(default_factory=list)
    verify_skipped: str | None = None

    @property
    def failed(self) -> bool:
        return self.sanity is not None or any(kind(f.kind).severity == ERROR for f in self.findings)


def sanity_problem(path: str, base_offset: int, suffix: str) -> str | None:
    """Why ``path`` fails Kafka's load-time sanity check, or ``None`` when it passes."""
    try:
        if suffix == ".txnindex":
            with TransactionIndex(path, base_offset, writable=False) as txn_index:
                txn_index.sanity_check()  # also refuses a record version other than 0
        else:
            cls = OffsetIndex if suffix == ".index" else TimeIndex
            with cls(path, base_offset, writable=False) as index:
                index.sanity_check()
    except CorruptIndexError as exc:
        return str(exc)
    return None


def check_index_file(path: str) -> CheckResult:
    """Kafka's sanity rules, then verify's checks of ``path`` against its ``.log`` when there is one."""
    base_offset, suffix = parse_segment_file_name(path)
    result = CheckResult(path)
    if suffix == ".log":
        raise DumpUsageError(
            f"{path}: --check takes an index file (.index, .timeindex, .txnindex); verify checks a .log"
        )
    result.sanity = sanity_problem(path, base_offset, suffix)
    directory = os.path.dirname(os.path.abspath(path))
    log_path = segment_file(directory, base_offset, ".log")
    if not os.path.isfile(log_path):
        result.verify_skipped = f"no {os.path.basename(log_path)} beside it"
        return result
    partition = parse_partition_dir_name(os.path.basename(directory))
    if suffix == ".txnindex":
        if partition is None:
            result.verify_skipped = "its directory is not a partition dir (<topic>-<partition>), which a replay needs"
            return result
        report = verify_partition(directory)
        result.findings = [f for f in report.findings if os.path.abspath(f.file) == os.path.abspath(path)]
        return result
    topic, number = partition if partition is not None else ("", -1)
    bases = segment_base_offsets(directory)
    task = SegmentTask(
        os.path.dirname(directory), directory, topic, number, base_offset, log_path, os.path.getsize(log_path),
        active=bool(bases) and base_offset == bases[-1], index_interval_bytes=DEFAULT_INDEX_INTERVAL_BYTES,
        segment_index_bytes=DEFAULT_SEGMENT_INDEX_BYTES, check=True,
    )  # fmt: skip
    outcome = process_segment(task)
    result.findings = [f for f in outcome.findings if os.path.abspath(f.file) == os.path.abspath(path)]
    return result


def format_check(result: CheckResult) -> list[str]:
    """The lines of one file's check: Kafka's verdict, then verify's findings or why it did not run."""
    lines = [
        f"{result.file} passed sanity check."
        if result.sanity is None
        else f"{result.file} failed sanity check: {result.sanity}"
    ]
    if result.verify_skipped is not None:
        lines.append(f"{result.file}: verify's checks not run ({result.verify_skipped})")
    elif not result.findings:
        lines.append(f"{result.file} passed verify's checks against its .log.")
    for f in result.findings:
        where = "" if f.position is None else f" at byte {f.position}"
        entry = "" if f.entry is None else f" (entry {f.entry})"
        lines.append(f"{kind(f.kind).severity} {f.kind}{where}{entry}: {f.detail}")
    return lines
