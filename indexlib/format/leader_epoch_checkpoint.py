"""A partition's ``leader-epoch-checkpoint``, as text: Kafka's ``LeaderEpochCheckpointFile`` (the
:mod:`.checkpoint` shape, version 0, one ``<epoch> <startOffset>`` line per epoch), and what Kafka's
``LeaderEpochFileCache`` makes of it.

Invariants of a file Kafka wrote: epochs strictly increasing, start offsets strictly increasing, none negative
(every entry goes through ``LeaderEpochFileCache.assign``, which drops the older entries that break monotonicity
before it adds one, and the file is ``epochs.values()`` of a ``TreeMap`` by epoch). On load the cache replays the
file through the same ``assign`` (without writing it back): a negative epoch or start offset throws, an entry of the
latest epoch with a start offset not below the latest's is ignored, and any other non-monotonic entry removes the
earlier entries it conflicts with. Pure computation: this module never opens a file."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .checkpoint import CheckpointError, format_checkpoint, java_parse_int, parse_checkpoint


@dataclass(frozen=True, slots=True)
class EpochEntry:
    """One line of the file: the first offset written under a leader epoch (Kafka's ``EpochEntry``)."""

    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class LeaderEpochProblem:
    """Something a leader-epoch checkpoint holds that Kafka would not have written. ``index`` is the entry's
    position in the file (0-based), None for the file as a whole. ``kind`` is one of ``malformed`` (Kafka refuses
    to read the file), ``epoch_not_increasing``, ``start_offset_not_increasing``."""

    kind: str
    index: int | None
    message: str


def _epoch_entry(fields: list[str]) -> EpochEntry | None:
    if len(fields) != 2:
        return None
    return EpochEntry(java_parse_int(fields[0], 32), java_parse_int(fields[1], 64))


def parse_leader_epoch_checkpoint(text: str, path: str) -> list[EpochEntry]:
    """The entries of a ``leader-epoch-checkpoint``'s text, in file order, not deduplicated or reordered (see
    :func:`load_leader_epochs` for what the cache keeps). A 0-byte file has none. Raises :class:`CheckpointError`
    naming ``path`` for what Kafka refuses: the :mod:`.checkpoint` rules, and a negative epoch or start offset
    (``assign`` throws ``IllegalArgumentException`` while the cache loads)."""
    entries = parse_checkpoint(text, path, _epoch_entry)
    for entry in entries:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise CheckpointError(f"{path}: invalid leader epoch entry {entry.epoch} {entry.start_offset}")
    return entries


def format_leader_epoch_checkpoint(entries: Iterable[EpochEntry]) -> str:
    """The text Kafka writes for these entries, in the order given (Kafka writes ascending epochs)."""
    return format_checkpoint(f"{entry.epoch} {entry.start_offset}" for entry in entries)


def validate_leader_epochs(entries: Sequence[EpochEntry]) -> list[LeaderEpochProblem]:
    """What breaks the invariants of a file Kafka wrote: each entry's epoch and start offset must be above the
    previous entry's (Kafka's ``assign`` would have removed the earlier entry of two with the same start offset).
    Empty for every file a broker wrote. Never raises on content."""
    problems: list[LeaderEpochProblem] = []
    for index in range(1, len(entries)):
        before, entry = entries[index - 1], entries[index]
        if entry.epoch <= before.epoch:
            problems.append(
                LeaderEpochProblem("epoch_not_increasing", index, f"epoch {entry.epoch} follows epoch {before.epoch}")
            )
        if entry.start_offset <= before.start_offset:
            problems.append(
                LeaderEpochProblem(
                    "start_offset_not_increasing",
                    index,
                    f"epoch {entry.epoch} starts at {entry.start_offset}, "
                    f"not after epoch {before.epoch}'s start {before.start_offset}",
                )
            )
    return problems


def check_leader_epoch_checkpoint(text: str, path: str) -> list[LeaderEpochProblem]:
    """Every problem of a ``leader-epoch-checkpoint``'s text: one ``malformed`` problem when Kafka refuses to read
    it, else :func:`validate_leader_epochs` of its entries. Never raises on content."""
    try:
        entries = parse_leader_epoch_checkpoint(text, path)
    except CheckpointError as exc:
        return [LeaderEpochProblem("malformed", None, str(exc))]
    return validate_leader_epochs(entries)


def load_leader_epochs(entries: Iterable[EpochEntry]) -> list[EpochEntry]:
    """The cache ``LeaderEpochFileCache`` holds after loading these entries (its constructor's ``assign`` of each,
    in order), ascending by epoch: an entry of the latest epoch whose start offset is not below the latest's is
    skipped; otherwise the newest entries whose epoch or start offset is not below the new one's are removed, then
    it is added. Raises :class:`CheckpointError` on a negative epoch or start offset, as ``assign`` throws."""
    cache: list[EpochEntry] = []
    for entry in entries:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise CheckpointError(f"invalid leader epoch entry {entry.epoch} {entry.start_offset}")
        if cache and entry.epoch == cache[-1].epoch and entry.start_offset >= cache[-1].start_offset:
            continue
        while cache and (cache[-1].epoch >= entry.epoch or cache[-1].start_offset >= entry.start_offset):
            cache.pop()
        cache.append(entry)
    return cache


def truncate_from_end(entries: Sequence[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """``LeaderEpochFileCache.truncateFromEnd``: the entries whose start offset is below ``end_offset`` (every
    entry when ``end_offset`` is negative). ``entries`` as :func:`load_leader_epochs` returns them."""
    if end_offset < 0:
        return list(entries)
    return [entry for entry in entries if entry.start_offset < end_offset]


def truncate_from_start(entries: Sequence[EpochEntry], start_offset: int) -> list[EpochEntry]:
    """``LeaderEpochFileCache.truncateFromStart``: the entries starting at or below ``start_offset`` are removed,
    the last of them kept with its start moved to ``start_offset`` (an entry at exactly ``start_offset`` stays as
    it is). ``entries`` as :func:`load_leader_epochs` returns them."""
    kept = [entry for entry in entries if entry.start_offset > start_offset]
    removed = len(entries) - len(kept)
    if removed:
        return [EpochEntry(entries[removed - 1].epoch, start_offset), *kept]
    return kept
