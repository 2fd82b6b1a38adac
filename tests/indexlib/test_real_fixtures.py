"""Every index file that a real Kafka broker wrote reads back exactly and passes Kafka's sanity rules."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from indexlib import OffsetIndex, TimeIndex, TransactionIndex

from ..conftest import KAFKA_REAL, requires_kafka_real

SUFFIXES = (".index", ".timeindex", ".txnindex")


def fixture_files() -> list[Path]:
    if not KAFKA_REAL.is_dir():
        return []
    return sorted(p for p in KAFKA_REAL.rglob("*") if p.suffix in SUFFIXES and p.is_file())


def decode_independently(path: Path) -> list[tuple]:
    """Decode the raw bytes with struct only, from the format description."""
    data = path.read_bytes()
    base = int(path.name.split(".")[0])
    if path.suffix == ".index":
        return [(base + r, p) for r, p in struct.iter_unpack(">ii", data[: len(data) // 8 * 8])]
    if path.suffix == ".timeindex":
        return [(t, base + r) for t, r in struct.iter_unpack(">qi", data[: len(data) // 12 * 12])]
    return [rec[1:] for rec in struct.iter_unpack(">hqqqq", data[: len(data) // 34 * 34])]


@requires_kafka_real
def test_fixture_tree_has_all_three_kinds():
    kinds = {p.suffix for p in fixture_files()}
    assert kinds == set(SUFFIXES)
    assert len(fixture_files()) > 100


@requires_kafka_real
@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: str(p.relative_to(KAFKA_REAL)))
def test_real_index_file_reads_back_and_is_sane(path):
    base = int(path.name.split(".")[0])
    expected = decode_independently(path)
    if path.suffix == ".txnindex":
        with TransactionIndex(path, base, writable=False) as index:
            assert [tuple(t) for t in index.all_aborted_txns()] == expected
            index.sanity_check()
        return
    cls = OffsetIndex if path.suffix == ".index" else TimeIndex
    with cls(path, base, writable=False) as index:
        assert [tuple(e) for e in index] == expected
        assert index.entries == len(expected)
        index.sanity_check()
        if expected:  # every stored entry is found by an exact lookup
            key = 0
            for entry in expected:
                assert tuple(index.lookup(entry[key])) == entry
