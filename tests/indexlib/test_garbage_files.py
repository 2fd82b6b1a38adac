"""Random garbage never crashes the readers with anything but CorruptIndexError/ValueError naming the file."""

from __future__ import annotations

import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from indexlib import CorruptIndexError, OffsetIndex, TimeIndex, TransactionIndex


def exercise(index, targets) -> None:
    """Every read-only operation a reader uses."""
    index.sanity_check()
    entries = index.to_numpy()
    assert len(entries) == index.entries
    for n in range(index.entries):
        index.entry(n)
    for target in targets:
        index.lookup(target)
        index.lookup_ceiling(target)


@settings(max_examples=400, deadline=None)
@given(
    data=st.binary(max_size=400),
    base=st.integers(0, 2**40),
    targets=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5),
)
def test_garbage_offset_and_time_index(data, base, targets):
    with tempfile.TemporaryDirectory() as d:
        for cls, name in ((OffsetIndex, "garbage.index"), (TimeIndex, "garbage.timeindex")):
            path = os.path.join(d, name)
            with open(path, "wb") as f:
                f.write(data)
            try:
                with cls(path, base, writable=False) as index:
                    exercise(index, targets)
            except (CorruptIndexError, ValueError) as exc:
                assert path in str(exc)
            with open(path, "rb") as f:
                assert f.read() == data  # reading never changes the file


@settings(max_examples=400, deadline=None)
@given(data=st.binary(max_size=400), start=st.integers(0, 2**40), fetch=st.integers(-10, 2**41))
def test_garbage_transaction_index(data, start, fetch):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "garbage.txnindex")
        with open(path, "wb") as f:
            f.write(data)
        try:
            with TransactionIndex(path, start, writable=False) as index:
                index.sanity_check()
                index.all_aborted_txns()
                index.collect_aborted_txns(fetch, fetch + 100)
        except (CorruptIndexError, ValueError) as exc:
            assert path in str(exc)
        with open(path, "rb") as f:
            assert f.read() == data


def test_zero_version_garbage_is_read_as_records():
    # garbage that happens to carry version 0 decodes without error (no checksum exists to catch it)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "x.txnindex")
        with open(path, "wb") as f:
            f.write(b"\x00\x00" + b"\xff" * 32)
        with TransactionIndex(path, 0, writable=False) as index:
            assert index.all_aborted_txns() == [(-1, -1, -1, -1)]
