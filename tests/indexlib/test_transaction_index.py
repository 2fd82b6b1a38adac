"""TransactionIndex: the cases of Kafka's TransactionIndexTest (kafka-index-format.md 7.3) and more."""

from __future__ import annotations

import os
import struct

import pytest

from indexlib import AbortedTxn, CorruptIndexError, InvalidOffsetError, ReadOnlyIndexError, TransactionIndex

TXNS = [AbortedTxn(0, 0, 10, 11), AbortedTxn(1, 5, 15, 13), AbortedTxn(2, 18, 35, 25), AbortedTxn(3, 32, 50, 40)]


@pytest.fixture
def path(tmp_path):
    return tmp_path / "00000000000000000000.txnindex"


def test_file_created_by_first_append(path):
    index = TransactionIndex(path, 0)
    assert not path.exists() and index.all_aborted_txns() == []
    index.append(TXNS[0])
    index.flush()
    assert path.exists() and path.stat().st_size == 34
    index.close()


def test_position_set_correctly_when_opened(path):
    with TransactionIndex(path, 0) as index:
        for txn in TXNS[:2]:
            index.append(txn)
    with TransactionIndex(path, 0) as reopened:
        for txn in TXNS[2:]:
            reopened.append(txn)
        assert reopened.all_aborted_txns() == TXNS


def test_sanity_check(path):
    with TransactionIndex(path, 0) as index:
        for i, last in enumerate(range(10, 51, 10)):
            index.append(AbortedTxn(i, last - 5, last, last + 1))
    with TransactionIndex(path, 100, writable=False) as reopened:
        with pytest.raises(CorruptIndexError, match="record 0 has last offset 10, below the segment start offset 100"):
            reopened.sanity_check()
    with TransactionIndex(path, 10, writable=False) as fine:
        fine.sanity_check()


def test_last_offset_must_increase(path):
    with TransactionIndex(path, 0) as index:
        index.append(AbortedTxn(1, 5, 15, 13))
        with pytest.raises(InvalidOffsetError):
            index.append(AbortedTxn(0, 0, 15, 11))  # equal
        with pytest.raises(InvalidOffsetError):
            index.append(AbortedTxn(0, 0, 10, 11))  # smaller
    with TransactionIndex(path, 0) as reopened:  # also across a reopen
        with pytest.raises(InvalidOffsetError):
            reopened.append(AbortedTxn(0, 0, 10, 11))


@pytest.mark.parametrize(
    ("fetch", "upper", "included", "complete"),
    [
        (0, 100, TXNS, False),
        (0, 32, TXNS[:3], True),
        (0, 35, TXNS, True),
        (10, 35, TXNS, True),
        (11, 35, TXNS[1:], True),
        (20, 41, TXNS[2:], False),
    ],
)
def test_collect_aborted_transactions(path, fetch, upper, included, complete):
    with TransactionIndex(path, 0) as index:
        for txn in TXNS:
            index.append(txn)
        assert index.collect_aborted_txns(fetch, upper) == (included, complete)


def test_truncate(path):
    with TransactionIndex(path, 0) as index:
        for txn in TXNS:
            index.append(txn)
        index.truncate_to(51)
        assert index.all_aborted_txns() == TXNS
        index.truncate_to(50)
        assert index.all_aborted_txns() == TXNS[:3]
        assert index.last_offset == 35
        index.append(AbortedTxn(9, 40, 45, 41))  # appends continue after the cut
        index.reset()
        assert index.all_aborted_txns() == [] and index.last_offset is None
    assert path.exists() and path.stat().st_size == 0  # reset truncates, never deletes


def test_serde_round_trip_keeps_version_zero(path):
    with TransactionIndex(path, 0) as index:
        index.append(TXNS[2])
    raw = path.read_bytes()
    assert struct.unpack(">hqqqq", raw) == (0, 2, 18, 35, 25)
    with TransactionIndex(path, 0, writable=False) as ro:
        assert ro.to_numpy()["version"].tolist() == [0]


def test_trailing_partial_record_is_ignored_but_not_appended_to(path):
    path.write_bytes(struct.pack(">hqqqq", 0, 7, 1, 2, 3) + b"\x00" * 10)
    with TransactionIndex(path, 0) as index:
        assert index.all_aborted_txns() == [AbortedTxn(7, 1, 2, 3)]
        with pytest.raises(CorruptIndexError, match="partial record"):
            index.append(AbortedTxn(7, 4, 5, 6))
    assert path.stat().st_size == 44


def test_bad_version_is_corrupt(path):
    path.write_bytes(struct.pack(">hqqqq", 0, 7, 1, 2, 3) + struct.pack(">hqqqq", 1, 7, 4, 5, 6))
    with TransactionIndex(path, 0, writable=False) as index:
        with pytest.raises(CorruptIndexError, match=r"record 1 \(byte 34\) has version 1"):
            index.all_aborted_txns()


def test_read_only_missing_file_is_empty_and_never_created(path):
    with TransactionIndex(path, 0, writable=False) as index:
        assert index.all_aborted_txns() == [] and not index.exists
        with pytest.raises(ReadOnlyIndexError):
            index.append(TXNS[0])
        with pytest.raises(ReadOnlyIndexError):
            index.reset()
    assert not os.path.exists(path)
