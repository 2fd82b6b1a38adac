"""``dump --check FILE``: one index file held to Kafka's load-time sanity rules (kafka-index-format.md 4.1, the
index classes' ``sanity_check``) and, when its ``.log`` is beside it, to verify's checks of that file (the same
engine and checks as ``verify``: :func:`indexlib.engine.process_segment` for a ``.index`` or ``.timeindex``, the
partition's replay through :func:`indexlib.engine.verify_partition` for a ``.txnindex``).

A producer snapshot or a checkpoint file is held to what Kafka refuses to read (its parser), and a snapshot or a
``leader-epoch-checkpoint`` to the checks verify makes of it (:func:`indexlib.recovery.state_checks.snapshot_findings`,
:func:`~indexlib.recovery.state_checks.leader_epoch_findings`; for a ``leader-epoch-checkpoint`` beside its
partition's ``.log`` files also its epochs against theirs, through the partition's verify). An offset checkpoint
has its reading only (verify reads it as each partition's log start or recovery point).

Invariants: read-only; only findings about FILE itself are returned (a ``.log``'s own findings belong to a dump
or a verify of the ``.log``); an error-severity finding or a failed sanity rule is a finding (exit 1).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...engine import SegmentTask, process_segment, verify_partition
from ...format.checkpoint import CheckpointError, parse_offset_checkpoint
from ...format.errors import CorruptIndexError
from ...format.layout import parse_partition_dir_name, segment_base_offsets, segment_file
from ...format.leader_epoch_checkpoint import parse_leader_epoch_checkpoint
from ...format.offset_index import OffsetIndex
from ...format.producer_snapshot import SnapshotError, parse_snapshot_entries
from ...format.time_index import TimeIndex
from ...format.transaction_index import TransactionIndex
from ...recovery.findings import ERROR, Finding, kind
from ...recovery.settings import DEFAULT_INDEX_INTERVAL_BYTES, DEFAULT_SEGMENT_INDEX_BYTES
from ...recovery.state_checks import leader_epoch_findings, snapshot_findings
from .model import DumpUsageError, dump_kind, parse_segment_file_name
from .reading import check_regular
from .state_files import read_text, read_whole


@dataclass
class CheckResult:
    """What ``--check`` found about one file: ``sanity`` (Kafka's rule that fails, or ``None``), verify's
    ``findings`` on the file (empty when there is no ``.log`` to check it against) and why verify did not run."""

    file: str
    sanity: str | None = None
    findings: list[Finding] = field(default_factory=list)
    verify_skipped: str | None = None
    #: what verify's checks held the file against, for the verdict line ("" for the file on its own)
    verified_against: str = "its .log"

    @property
    def failed(self) -> bool:
        return self.sanity is not None or any(kind(f.kind).severity == ERROR for f in self.findings)


#: the largest index file Kafka maps (``FileChannel.map`` takes at most ``Integer.MAX_VALUE`` bytes)
MAX_MAPPED_INDEX_BYTES = 2**31 - 1


def sanity_problem(path: str, base_offset: int, suffix: str) -> str | None:
    """Why ``path`` fails Kafka's load-time sanity check, or ``None`` when it passes."""
    try:
        if suffix == ".txnindex":
            with TransactionIndex(path, base_offset, writable=False) as txn_index:
                txn_index.sanity_check()  # also refuses a record version other than 0
        else:
            size = os.path.getsize(path)
            if size > MAX_MAPPED_INDEX_BYTES:  # Java's FileChannel.map refuses it: the broker cannot open the index
                return f"{path}: {size} bytes, more than the {MAX_MAPPED_INDEX_BYTES} Kafka can map: it cannot load it"
            cls = OffsetIndex if suffix == ".index" else TimeIndex
            with cls(path, base_offset, writable=False) as index:
                index.sanity_check()
    except CorruptIndexError as exc:
        return str(exc)
    return None


def check_index_file(path: str) -> CheckResult:
    """Kafka's sanity rules, then verify's checks of ``path`` against its ``.log`` when there is one (a snapshot or
    a checkpoint: :func:`check_state_file`)."""
    _, kind = dump_kind(path)
    if kind in ("producer_snapshot", "leader_epoch_checkpoint", "offset_checkpoint"):
        return check_state_file(path, kind)
    if kind == "kraft_snapshot":
        raise DumpUsageError(f"{path}: --check takes an index file, a .snapshot or a checkpoint, not a KRaft snapshot")
    base_offset, suffix = parse_segment_file_name(path)
    result = CheckResult(path)
    if suffix == ".log":
        raise DumpUsageError(
            f"{path}: --check takes an index file (.index, .timeindex, .txnindex), a .snapshot or a checkpoint; "
            "verify checks a .log"
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


OFFSET_CHECKPOINT_VERIFY = "verify reads it only as each partition's log start or recovery point"


def check_state_file(path: str, kind: str) -> CheckResult:
    """A producer snapshot or a checkpoint: whether Kafka reads it (``sanity``), then verify's findings on it."""
    check_regular(path)
    result = CheckResult(path, verified_against="")
    if kind == "producer_snapshot":
        data = read_whole(path)
        try:
            parse_snapshot_entries(data, path)
        except SnapshotError as exc:
            result.sanity = str(exc)
        result.findings = snapshot_findings({path: data})
        _add_partition_findings(result, path)
        return result
    try:
        text = read_text(path)
    except CheckpointError as exc:  # not UTF-8: Kafka cannot read it, a failed check as a malformed line is
        result.sanity = str(exc)
        if kind == "leader_epoch_checkpoint":
            result.findings = leader_epoch_findings(path, None, str(exc))
            _add_partition_findings(result, path)
        else:
            result.verify_skipped = OFFSET_CHECKPOINT_VERIFY
        return result
    if kind == "offset_checkpoint":
        try:
            parse_offset_checkpoint(text, path)
        except CheckpointError as exc:
            result.sanity = str(exc)
        result.verify_skipped = OFFSET_CHECKPOINT_VERIFY
        return result
    try:
        parse_leader_epoch_checkpoint(text, path)
    except CheckpointError as exc:
        result.sanity = str(exc)
    result.findings = leader_epoch_findings(path, text)
    _add_partition_findings(result, path)
    return result


def _add_partition_findings(result: CheckResult, path: str) -> None:
    """A snapshot's entries or a leader-epoch-checkpoint's epochs against the partition's batches, when it lies in
    a partition dir with segments: what verify of the partition finds on this file."""
    directory = os.path.dirname(os.path.abspath(path))
    if parse_partition_dir_name(os.path.basename(directory)) is None or not segment_base_offsets(directory):
        return
    report = verify_partition(directory)
    mine = [f for f in report.findings if os.path.abspath(f.file) == os.path.abspath(path)]
    known = {f.kind for f in result.findings}  # the file's own findings, which verify makes too
    result.findings += [f for f in mine if f.kind not in known]
    result.verified_against = "its partition's .log files"


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
        against = f" against {result.verified_against}" if result.verified_against else ""
        lines.append(f"{result.file} passed verify's checks{against}.")
    for f in result.findings:
        where = "" if f.position is None else f" at byte {f.position}"
        entry = "" if f.entry is None else f" (entry {f.entry})"
        lines.append(f"{kind(f.kind).severity} {f.kind}{where}{entry}: {f.detail}")
    return lines
