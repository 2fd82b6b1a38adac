"""A read-only open must work for a user who cannot write the file (mode 0444, another owner)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

from indexlib import AbortedTxn, OffsetIndex, TimeIndex, TransactionIndex

from ..conftest import NOBODY, run_as_unprivileged


@pytest.fixture
def shared_dir():
    directory = tempfile.mkdtemp(prefix="indexlib-ro-")
    os.chmod(directory, 0o755)
    yield directory
    shutil.rmtree(directory)


def test_read_only_open_by_user_who_cannot_write(shared_dir):
    index_path = os.path.join(shared_dir, "00000000000000000100.index")
    time_path = os.path.join(shared_dir, "00000000000000000100.timeindex")
    txn_path = os.path.join(shared_dir, "00000000000000000100.txnindex")
    with OffsetIndex(index_path, 100, max_index_size=80) as index:
        index.append(105, 0)
        index.append(110, 4096)
    with TimeIndex(time_path, 100, max_index_size=120) as index:
        index.maybe_append(1000, 105)
    with TransactionIndex(txn_path, 100) as index:
        index.append(AbortedTxn(7, 101, 108, 101))
    for path in (index_path, time_path, txn_path):
        os.chmod(path, 0o444)
    before = {p: (os.stat(p).st_mtime_ns, Path(p).read_bytes()) for p in (index_path, time_path, txn_path)}

    def child():
        try:
            os.open(index_path, os.O_RDWR)
            can_write = True
        except PermissionError:
            can_write = False
        with OffsetIndex(index_path, 100, writable=False) as oi, TimeIndex(time_path, 100, writable=False) as ti:
            oi.sanity_check()
            ti.sanity_check()
            with TransactionIndex(txn_path, 100, writable=False) as xi:
                xi.sanity_check()
                txns = [list(t) for t in xi.all_aborted_txns()]
            return {
                "uid": os.geteuid(),
                "can_write": can_write,
                "lookup": list(oi.lookup(111)),
                "time": list(ti.lookup(2000)),
                "txns": txns,
            }

    result = run_as_unprivileged(child)
    assert "error" not in result, result
    assert result["can_write"] is False  # the test is meaningful: this user cannot write the file
    if os.geteuid() == 0:
        assert result["uid"] == NOBODY
    assert result["lookup"] == [110, 4096]
    assert result["time"] == [1000, 105]
    assert result["txns"] == [[7, 101, 108, 101]]
    after = {p: (os.stat(p).st_mtime_ns, Path(p).read_bytes()) for p in before}
    assert after == before
