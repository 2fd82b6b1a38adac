"""Segments and partitions written the way a broker writes them, for test data, the demo and benchmarks, from the
batches of :mod:`.batch_encoder`.

* :func:`generate_partition`: a small, realistic partition of ``.log`` segments, optionally with
  interleaved transactions that span segment boundaries.
* :func:`write_uniform_segment`: a large segment of equal-size batches, written quickly with numpy.

Invariants: offsets are contiguous and every batch is well formed; the output depends only on the arguments (one
seeded generator, drawn from in the order the batches are written).
"""

from __future__ import annotations

import dataclasses
import os
import pathlib
import struct
from collections.abc import Callable
from typing import BinaryIO

import crc32c
import numpy as np

from ..format.layout import LOG_SUFFIX, segment_name
from .batch_encoder import (
    BASE_TIMESTAMP_AT,
    BATCH_OVERHEAD,
    COMPRESSION_GZIP,
    COMPRESSION_NONE,
    CRC_START,
    MAX_TIMESTAMP_AT,
    GeneratorArgumentError,
    encode_batch_v2,
    encode_control_batch,
)

__all__ = ["generate_partition", "write_uniform_segment"]


# --------------------------------------------------------------------------------- partitions
def generate_partition(
    partition_dir: str | os.PathLike[str],
    *,
    segments: int = 3,
    batches_per_segment: int = 50,
    records_per_batch: tuple[int, int] = (1, 20),
    value_bytes: tuple[int, int] = (20, 200),
    compression: int = 0,
    transactional_producers: int = 0,
    abort_every: int = 3,
    base_offset: int = 0,
    start_timestamp: int = 1_700_000_000_000,
    out_of_order_timestamps: bool = False,
    epochs: bool = False,
    seed: int = 0,
) -> list[pathlib.Path]:
    """Write ``segments`` ``<base:020d>.log`` files (no indexes) with contiguous offsets; return their paths.

    Each segment holds ``batches_per_segment`` batches (markers included). ``records_per_batch`` and
    ``value_bytes`` are inclusive ranges. With ``transactional_producers > 0``, non-transactional batches
    (producer id -1) are interleaved with transactions of producer ids ``1000, 1001, ...``: each
    transaction is a few transactional data batches then a marker; the k-th transaction started
    (1-based) is aborted when ``k % abort_every == 0`` (``abort_every=0`` never aborts). At every
    segment boundary at least one transaction (two when there are two producers or more) is open, room
    permitting, so transactions span boundaries and overlap; every transaction is closed by the end of
    the last segment. ``compression`` applies to data batches only. Timestamps increase with jitter; with
    ``out_of_order_timestamps`` some batches lie below earlier ones and have their records shuffled in
    time. With ``epochs``, what producer state and the leader-epoch cache read varies too: the partition leader
    epoch rises now and then (and a rare batch carries an older one), some transactions end with a marker of the
    next producer epoch (the producer's sequences restart at 0), coordinator epochs rise, and most
    non-transactional batches come from two idempotent producers (ids ``2000``, ``2001``; sometimes without a
    sequence). The output depends only on the arguments.
    """
    _check_partition_arguments(
        segments, batches_per_segment, records_per_batch, value_bytes, compression, transactional_producers, abort_every
    )
    directory = pathlib.Path(partition_dir)
    directory.mkdir(parents=True, exist_ok=True)
    writer = _PartitionWriter(
        rng=np.random.default_rng(seed),
        pids=[1000 + k for k in range(transactional_producers)],
        records_per_batch=records_per_batch,
        value_bytes=value_bytes,
        compression=compression,
        abort_every=abort_every,
        out_of_order_timestamps=out_of_order_timestamps,
        epochs=epochs,
        next_offset=base_offset,
        cursor=start_timestamp,
    )
    total = segments * batches_per_segment
    paths: list[pathlib.Path] = []
    for segment in range(segments):
        path = directory / segment_name(writer.next_offset, LOG_SUFFIX)
        chunks: list[bytes] = []
        for position in range(batches_per_segment):
            remaining = total - (segment * batches_per_segment + position)
            near_boundary = segment < segments - 1 and position >= batches_per_segment - 2
            boundary = segment < segments - 1 and position == batches_per_segment - 1
            chunks.append(writer.next_batch(remaining, near_boundary, boundary))
        path.write_bytes(b"".join(chunks))
        paths.append(path)
    return paths


def _check_partition_arguments(
    segments: int,
    batches_per_segment: int,
    records_per_batch: tuple[int, int],
    value_bytes: tuple[int, int],
    compression: int,
    transactional_producers: int,
    abort_every: int,
) -> None:
    """:class:`GeneratorArgumentError` unless :func:`generate_partition` can write from these."""
    if segments < 1 or batches_per_segment < 1:
        raise GeneratorArgumentError("segments and batches_per_segment must be >= 1")
    if not 1 <= records_per_batch[0] <= records_per_batch[1]:
        raise GeneratorArgumentError(f"bad records_per_batch range {records_per_batch}")
    if not 0 <= value_bytes[0] <= value_bytes[1]:
        raise GeneratorArgumentError(f"bad value_bytes range {value_bytes}")
    if compression not in (COMPRESSION_NONE, COMPRESSION_GZIP):
        raise GeneratorArgumentError(f"unsupported compression codec {compression} (only 0 = none and 1 = gzip)")
    if transactional_producers < 0 or abort_every < 0:
        raise GeneratorArgumentError("transactional_producers and abort_every must be >= 0")


@dataclasses.dataclass
class _PartitionWriter:
    """The batches of :func:`generate_partition`, one at a time: the offsets, timestamps, producer sequences and
    open transactions so far. Every random draw comes from ``rng``, in the order the batches are made."""

    rng: np.random.Generator
    pids: list[int]  # the transactional producers' ids
    records_per_batch: tuple[int, int]
    value_bytes: tuple[int, int]
    compression: int
    abort_every: int
    out_of_order_timestamps: bool
    epochs: bool
    next_offset: int
    cursor: int  # timestamp of the next in-order record
    sequences: dict[int, int] = dataclasses.field(default_factory=dict)
    open_txns: dict[int, list[int]] = dataclasses.field(
        default_factory=dict
    )  # pid -> [data batches still planned, txn number]
    txns_started: int = 0
    leader_epoch: int = 0
    coordinator_epoch: int = 0
    producer_epochs: dict[int, int] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.sequences = dict.fromkeys(self.pids, 0)

    def batch_leader_epoch(self) -> int:
        """The partition leader epoch of the next batch (0 without ``epochs``)."""
        if not self.epochs:
            return 0
        draw = self.rng.random()
        if draw < 0.03:
            self.leader_epoch += int(self.rng.integers(1, 4))
        elif draw < 0.04 and self.leader_epoch > 0:
            return self.leader_epoch - 1  # an older epoch: no new cache entry
        return self.leader_epoch

    def next_batch(self, remaining: int, near_boundary: bool, boundary: bool) -> bytes:
        """The next batch, ``remaining`` batches before the end (this one included); ``near_boundary``: one of the
        last two slots of a segment that is not the last, ``boundary``: its very last slot."""
        pids, open_txns, rng = self.pids, self.open_txns, self.rng
        idle = [p for p in pids if p not in open_txns]
        can_open = bool(idle) and remaining >= len(open_txns) + 2
        if pids and remaining <= len(open_txns):  # close everything before the end
            return self.marker(min(open_txns))
        if near_boundary and can_open and len(open_txns) < min(2, len(pids)):
            return self.open_txn(idle[int(rng.integers(len(idle)))])
        if not pids or rng.random() < 0.35:
            return self.data_batch(-1)
        pid = pids[int(rng.integers(len(pids)))]
        if pid in open_txns:
            if open_txns[pid][0] > 0 or boundary:  # no marker on a boundary slot
                return self.txn_data(pid)
            return self.marker(pid)
        if can_open:
            return self.open_txn(pid)
        return self.data_batch(-1)

    def data_batch(self, pid: int) -> bytes:
        """A data batch of producer ``pid`` (a transactional one), or of none (``-1``)."""
        rng = self.rng
        n = int(rng.integers(self.records_per_batch[0], self.records_per_batch[1] + 1))
        stamps = self.cursor + np.cumsum(rng.integers(0, 6, n))
        self.cursor = int(stamps[-1]) + int(rng.integers(0, 50))
        if self.out_of_order_timestamps and rng.random() < 0.2:
            stamps = stamps - int(rng.integers(1, 5_000))
            rng.shuffle(stamps)
        records = []
        for ts in stamps:
            key = None if rng.random() < 0.2 else b"key-%d" % int(rng.integers(0, 1000))
            value = rng.bytes(int(rng.integers(self.value_bytes[0], self.value_bytes[1] + 1)))
            records.append((key, value, int(ts)))
        leader_epoch = self.batch_leader_epoch()
        idempotent = pid < 0 and self.epochs and rng.random() < 0.7
        if idempotent:
            pid = 2000 + int(rng.integers(0, 2))
            self.sequences.setdefault(pid, 0)
        if pid < 0:
            batch = encode_batch_v2(
                self.next_offset, records, compression=self.compression, partition_leader_epoch=leader_epoch
            )
        else:
            sequence = -1 if idempotent and rng.random() < 0.1 else self.sequences[pid]
            batch = encode_batch_v2(
                self.next_offset,
                records,
                producer_id=pid,
                producer_epoch=self.producer_epochs.get(pid, 0),
                base_sequence=sequence,
                transactional=not idempotent,
                compression=self.compression,
                partition_leader_epoch=leader_epoch,
            )
            self.sequences[pid] += n
        self.next_offset += n
        return batch

    def open_txn(self, pid: int) -> bytes:
        """The first data batch of a new transaction of ``pid``."""
        self.txns_started += 1
        self.open_txns[pid] = [int(self.rng.integers(1, 5)), self.txns_started]
        return self.txn_data(pid)

    def txn_data(self, pid: int) -> bytes:
        self.open_txns[pid][0] -= 1
        return self.data_batch(pid)

    def marker(self, pid: int) -> bytes:
        """The marker that ends ``pid``'s open transaction: an abort for every ``abort_every``-th one started."""
        number = self.open_txns.pop(pid)[1]
        abort = self.abort_every > 0 and number % self.abort_every == 0
        epoch = self.producer_epochs.get(pid, 0)
        if self.epochs and self.rng.random() < 0.3:  # the marker of an epoch bump: the next epoch starts here
            epoch = self.producer_epochs[pid] = epoch + 1
            self.sequences[pid] = 0
        if self.epochs and self.rng.random() < 0.2:
            self.coordinator_epoch += 1
        batch = encode_control_batch(
            self.next_offset,
            pid,
            epoch,
            abort=abort,
            timestamp=self.cursor,
            coordinator_epoch=self.coordinator_epoch,
            partition_leader_epoch=self.batch_leader_epoch(),
        )
        self.next_offset += 1
        self.cursor += int(self.rng.integers(0, 50))
        return batch


# ------------------------------------------------------------------------------ big segments
def _crc_bit_contributions(template: bytes, field_at: int) -> np.ndarray:
    """For each bit of the big-endian int64 at ``field_at``, the XOR it makes to the batch CRC.

    CRC-32C is affine in its input: for messages of equal length, ``crc(m ^ d) = crc(m) ^ L(d)`` with
    ``L(d) = crc(d) ^ crc(zeros)``, and ``L`` is linear, so the CRC change for any new field value is the
    XOR of the contributions of the flipped bits.
    """
    covered_len = len(template) - CRC_START
    zero_crc = crc32c.crc32c(bytes(covered_len))
    out = np.empty(64, dtype=np.uint32)
    buf = bytearray(covered_len)
    for bit in range(64):
        at = field_at - CRC_START + 7 - bit // 8
        buf[at] = 1 << (bit % 8)
        out[bit] = crc32c.crc32c(buf) ^ zero_crc
        buf[at] = 0
    return out


def write_uniform_segment(
    path: str | os.PathLike[str],
    *,
    base_offset: int = 0,
    total_bytes: int,
    batch_bytes: int,
    records_per_batch: int = 1,
    seed: int = 0,
    producer_id: int = -1,
) -> int:
    """Write a ``.log`` of about ``total_bytes`` made of equal v2 batches of about ``batch_bytes``;
    return the number of batches.

    ``producer_id`` >= 0: every batch is that idempotent producer's (epoch 0, base sequence 0 in every batch:
    not a sequence a broker would accept, and nothing a rebuild reads), as most clients write since Kafka 3.0.

    Offsets are contiguous from ``base_offset``; timestamps strictly increase from batch to batch. One
    template batch is copied with numpy; base offsets (not CRC-covered) and the two timestamps are stamped
    in, and the CRC is patched using CRC-32C linearity. The file is ``max(1, total_bytes // size)``
    batches, so its size is within one batch of ``total_bytes``.
    """
    if records_per_batch < 1:
        raise GeneratorArgumentError("records_per_batch must be >= 1")
    if total_bytes <= 0:
        raise GeneratorArgumentError("total_bytes must be > 0")
    rng = np.random.default_rng(seed)
    start_ts = 1_700_000_000_000
    template = _uniform_template(base_offset, batch_bytes, records_per_batch, producer_id, start_ts, rng)
    count = max(1, total_bytes // len(template))
    span = records_per_batch - 1
    base_ts = start_ts + np.concatenate(([0], np.cumsum(rng.integers(1, 10, count - 1) + span)))
    offsets = base_offset + np.arange(count, dtype=np.int64) * records_per_batch
    with open(path, "wb") as f:
        _write_stamped_copies(f, template, offsets, base_ts, span, start_ts)
    return count


def _uniform_template(
    base_offset: int,
    batch_bytes: int,
    records_per_batch: int,
    producer_id: int,
    start_ts: int,
    rng: np.random.Generator,
) -> bytes:
    """The batch :func:`write_uniform_segment` copies: ``records_per_batch`` records of seeded bytes with timestamps
    from ``start_ts``, their values as long as fits ``batch_bytes`` (varint widths make an exact fit occasionally
    impossible)."""
    epoch = sequence = 0 if producer_id >= 0 else -1

    def encode(value_len: int, last_extra: int, values: Callable[[int], bytes]) -> bytes:
        records = []
        for r in range(records_per_batch):
            size = value_len + (last_extra if r == records_per_batch - 1 else 0)
            records.append((None, values(size), start_ts + r))
        return encode_batch_v2(
            base_offset, records, producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence
        )

    def zeros(size: int) -> bytes:
        return b"\x00" * size

    per_record = (batch_bytes - BATCH_OVERHEAD) // records_per_batch
    value_len = max(0, per_record - 8)
    while value_len > 0 and len(encode(value_len, 0, zeros)) > batch_bytes:
        value_len -= 1
    if len(encode(value_len, 0, zeros)) > batch_bytes:
        raise GeneratorArgumentError(f"batch_bytes {batch_bytes} is too small for {records_per_batch} records")
    extra = batch_bytes - len(encode(value_len, 0, zeros))
    while extra > 0 and len(encode(value_len, extra, zeros)) > batch_bytes:
        extra -= 1  # the last record's length varints may have grown by a byte or two
    return encode(value_len, extra, rng.bytes)  # the values filled with seeded bytes


def _write_stamped_copies(
    f: BinaryIO, template: bytes, offsets: np.ndarray, base_ts: np.ndarray, span: int, start_ts: int
) -> None:
    """Write one copy of ``template`` per offset, in blocks of about 64 MiB: each with its base offset (not
    CRC-covered) and its two timestamps (``base_ts`` and ``base_ts + span``) stamped in, and its CRC patched using
    CRC-32C linearity (:func:`_crc_bit_contributions`)."""
    size, count = len(template), len(offsets)
    template_crc = np.uint32(struct.unpack_from(">I", template, 17)[0])
    base_bits = _crc_bit_contributions(template, BASE_TIMESTAMP_AT)
    max_bits = _crc_bit_contributions(template, MAX_TIMESTAMP_AT)
    template_row = np.frombuffer(template, dtype=np.uint8)
    chunk = max(1, (64 << 20) // size)
    for start in range(0, count, chunk):
        stop = min(count, start + chunk)
        m = stop - start
        first = base_ts[start:stop].astype(np.int64)
        last = first + span
        flips_first = (first ^ np.int64(start_ts)).view(np.uint64)
        flips_last = (last ^ np.int64(start_ts + span)).view(np.uint64)
        crcs = np.full(m, template_crc, dtype=np.uint32)
        for bit in range(64):
            crcs ^= ((flips_first >> np.uint64(bit)) & np.uint64(1)).astype(np.uint32) * base_bits[bit]
            crcs ^= ((flips_last >> np.uint64(bit)) & np.uint64(1)).astype(np.uint32) * max_bits[bit]
        block = np.tile(template_row, (m, 1))
        block[:, 0:8] = offsets[start:stop].astype(">i8").view(np.uint8).reshape(m, 8)
        block[:, 17:21] = crcs.astype(">u4").view(np.uint8).reshape(m, 4)
        block[:, 27:35] = first.astype(">i8").view(np.uint8).reshape(m, 8)
        block[:, 35:43] = last.astype(">i8").view(np.uint8).reshape(m, 8)
        f.write(block.data.cast("B"))
