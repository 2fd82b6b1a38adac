"""Kafka's ``.txnindex`` file: the aborted transactions whose ABORT marker lies in a segment."""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator

import numpy as np
import numpy.typing as npt

from .errors import CorruptIndexError, InvalidOffsetError, ShortWriteError
from .index_file import IndexFile
from .values import AbortedTxn

#: Only version written and accepted.
ABORTED_TXN_VERSION = 0


class TransactionIndex(IndexFile):
    """Transaction index: a plain sequence of 34-byte big-endian records
    ``(int16 version=0, int64 producer_id, int64 first_offset, int64 last_offset,
    int64 last_stable_offset)``, offsets absolute.

    Invariants:

    * no preallocation and no mmap; the file is created by the first :meth:`append`, so a segment with
      no aborted transaction normally has no file;
    * ``last_offset`` (the ABORT marker's offset) strictly increases from record to record, checked on
      append, also against the records already in a reopened file (Kafka checks only appends made by the
      same instance);
    * a trailing partial record is ignored when reading, as Kafka does, but an append to such a file is
      refused (it would misalign every later record);
    * a record whose int16 version is not 0 is corrupt (Kafka reads only the high byte; we read both);
    * ``sanity_check``: no record has ``last_offset`` below the segment's start offset.

    ``writable=False`` never creates or changes the file and treats a missing file as empty.
    """

    KIND = "transaction index"
    RECORD_SIZE = 34
    DTYPE = np.dtype(
        [
            ("version", ">i2"),
            ("producer_id", ">i8"),
            ("first_offset", ">i8"),
            ("last_offset", ">i8"),
            ("last_stable_offset", ">i8"),
        ]
    )
    _RECORD_STRUCT = struct.Struct(">hqqqq")

    def __init__(self, path: str | os.PathLike[str], start_offset: int, writable: bool = True) -> None:
        super().__init__(path, writable)
        self._start_offset = int(start_offset)
        self._closed = False
        self._last_offset: int | None = None
        if os.path.lexists(self._path):
            self._open_fd(create=False)
            length = self._file_length()
            whole = length - length % self.RECORD_SIZE
            if whole:
                # Unchecked read: a bad version is reported by the readers, not by opening.
                last = os.pread(self._fd, self.RECORD_SIZE, whole - self.RECORD_SIZE)
                self._last_offset = self._RECORD_STRUCT.unpack(last)[3]

    # ------------------------------------------------------------------------------------- file
    def _open_fd(self, create: bool) -> None:
        self._fd = self._open_regular(os.O_RDWR | (os.O_CREAT if create else 0))

    def _file_length(self) -> int:
        return os.fstat(self._fd).st_size if self._fd >= 0 else 0

    def _is_open(self) -> bool:
        return not self._closed  # an open index may have no file yet (it is created by the first append)

    # ------------------------------------------------------------------------------- properties
    @property
    def start_offset(self) -> int:
        return self._start_offset

    @property
    def exists(self) -> bool:
        """Whether the file exists (it is created by the first append)."""
        return self._fd >= 0

    @property
    def length(self) -> int:
        """File length in bytes (0 when the file does not exist)."""
        self._check_open()
        return self._file_length()

    @property
    def entries(self) -> int:
        """Number of whole records in the file."""
        return self.length // self.RECORD_SIZE

    @property
    def last_offset(self) -> int | None:
        """``last_offset`` of the last record, or ``None`` when there is none."""
        return self._last_offset

    def __repr__(self) -> str:
        return f"TransactionIndex({self._path!r}, start_offset={self._start_offset})"

    # ---------------------------------------------------------------------------------- reading
    def to_numpy(self) -> npt.NDArray[np.void]:
        """All whole records as a big-endian structured array (``DTYPE``); versions checked."""
        self._check_open()
        length = self._file_length()
        whole = length - length % self.RECORD_SIZE
        if whole == 0:
            return np.empty(0, dtype=self.DTYPE)
        data = os.pread(self._fd, whole, 0)
        if len(data) != whole:
            raise CorruptIndexError(f"{self._path}: file shrank while being read")
        return transaction_records(data, self._path)

    def all_aborted_txns(self) -> list[AbortedTxn]:
        """Every record in file order."""
        records = self.to_numpy()
        return [AbortedTxn(int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in records.tolist()]

    def __iter__(self) -> Iterator[AbortedTxn]:
        return iter(self.all_aborted_txns())

    def collect_aborted_txns(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Aborted transactions that overlap ``[fetch_offset, upper_bound_offset)``.

        Kafka's rule: include a record when ``last_offset >= fetch_offset`` and
        ``first_offset < upper_bound_offset``; stop with ``is_complete=True`` right after the first
        record whose last stable offset is ``>= upper_bound_offset``.
        """
        collected: list[AbortedTxn] = []
        for txn in self.all_aborted_txns():
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound_offset:
                collected.append(txn)
            if txn.last_stable_offset >= upper_bound_offset:
                return collected, True
        return collected, False

    def sanity_check(self) -> None:
        """Kafka's rule: no record's last offset is below the segment's start offset."""
        records = self.to_numpy()
        bad = np.flatnonzero(records["last_offset"] < self._start_offset)
        if len(bad):
            n = int(bad[0])
            raise CorruptIndexError(
                f"{self._path}: corrupt transaction index: record {n} has last offset "
                f"{int(records['last_offset'][n])}, below the segment start offset {self._start_offset}"
            )

    # --------------------------------------------------------------------------------- mutation
    def append(self, txn: AbortedTxn) -> None:
        """Append one record; its last offset must exceed the previous record's."""
        self._check_writable()
        if self._last_offset is not None and txn.last_offset <= self._last_offset:
            raise InvalidOffsetError(
                f"{self._path}: the last offset of an appended aborted transaction must increase: "
                f"{txn.last_offset} after {self._last_offset}"
            )
        if self._fd < 0:
            self._open_fd(create=True)
        length = self._file_length()
        if length % self.RECORD_SIZE:
            raise CorruptIndexError(
                f"{self._path}: length {length} is not a multiple of {self.RECORD_SIZE}; "
                "refusing to append after a partial record"
            )
        record = self._RECORD_STRUCT.pack(
            ABORTED_TXN_VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
        )
        written = os.pwrite(self._fd, record, length)
        if written != len(record):
            os.ftruncate(self._fd, length)
            raise ShortWriteError(f"{self._path}: short write ({written} of {len(record)} bytes)")
        self._last_offset = txn.last_offset

    def truncate_to(self, offset: int) -> None:
        """Remove the first record with ``last_offset >= offset`` and everything after it."""
        self._check_writable()
        records = self.to_numpy()
        cut = np.flatnonzero(records["last_offset"] >= offset)
        if len(cut) == 0:
            return
        n = int(cut[0])
        os.ftruncate(self._fd, n * self.RECORD_SIZE)
        self._last_offset = int(records["last_offset"][n - 1]) if n > 0 else None

    def reset(self) -> None:
        """Truncate an existing file to 0 bytes (it is not deleted) and forget the last offset."""
        self._check_writable()
        if self._fd >= 0:
            os.ftruncate(self._fd, 0)
        self._last_offset = None

    def flush(self) -> None:
        """fsync the file, if it exists."""
        self._check_open()
        if self._fd >= 0 and self._writable:
            os.fsync(self._fd)

    def close_handler(self) -> None:
        """Close the file handle. Closing twice is a no-op."""
        super().close_handler()
        self._closed = True


def transaction_records(data: bytes, path: str) -> npt.NDArray[np.void]:
    """The whole records of a ``.txnindex``'s bytes (a trailing partial record ignored, as Kafka does), as a
    big-endian structured array; :class:`CorruptIndexError` naming ``path`` for a record whose version is not 0."""
    size = TransactionIndex.RECORD_SIZE
    records = np.frombuffer(data, dtype=TransactionIndex.DTYPE, count=len(data) // size)
    bad = np.flatnonzero(records["version"] != ABORTED_TXN_VERSION)
    if len(bad):
        n = int(bad[0])
        raise CorruptIndexError(
            f"{path}: record {n} (byte {n * size}) has version {int(records['version'][n])}; "
            f"only version {ABORTED_TXN_VERSION} exists"
        )
    return records
