"""Producer-state snapshots (``indexlib.format.producer_snapshot``): every entry parsed, the bytes
``ProducerStateManager.writeSnapshot`` writes, what ``readSnapshot`` refuses, and a round trip of every
``.snapshot`` real brokers wrote."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexlib.format.producer_snapshot import (
    EMPTY_SNAPSHOT,
    ProducerSnapshotEntry,
    SnapshotError,
    format_snapshot,
    kafka_snapshot_order,
    parse_snapshot,
    parse_snapshot_entries,
    snapshot_trailing_bytes,
)

from ..conftest import KAFKA_REAL, hex_dump_copy, requires_kafka_real, written_by_kafka

SNAPSHOTS = sorted(KAFKA_REAL.glob("*/*/*.snapshot")) or [None]


def _entry(pid=7, txn=-1, **fields) -> ProducerSnapshotEntry:
    values = dict(
        epoch=3, last_sequence=41, last_offset=1000, offset_delta=4, timestamp=1_760_000_000_000, coordinator_epoch=-1
    )
    values.update(fields)
    return ProducerSnapshotEntry(producer_id=pid, current_txn_first_offset=txn, **values)


def test_the_empty_snapshot_is_ten_bytes():
    """Version 1, the CRC-32C of the four zero bytes of the count, count 0: what every partition without producers
    gets at its log end (``__transaction_state``, ``__consumer_offsets``, ``__cluster_metadata``)."""
    assert bytes.fromhex("000148674bc700000000") == EMPTY_SNAPSHOT
    assert parse_snapshot_entries(EMPTY_SNAPSHOT, "s") == [] and parse_snapshot(EMPTY_SNAPSHOT, "s") == {}


def test_layout_of_an_entry():
    data = format_snapshot([_entry(pid=5, txn=0, coordinator_epoch=2)])
    assert len(data) == 10 + 46
    assert struct.unpack_from(">hIi", data)[0::2] == (1, 1)
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (5, 3, 41, 1000, 4, 1_760_000_000_000, 2, 0)
    [entry] = parse_snapshot_entries(data, "s")
    assert entry == _entry(pid=5, txn=0, coordinator_epoch=2) and entry.has_open_transaction


def test_parse_snapshot_keeps_returning_the_open_transactions():
    data = format_snapshot([_entry(pid=1, txn=100), _entry(pid=2), _entry(pid=3, txn=5)])
    assert parse_snapshot(data, "s") == {1: 100, 3: 5}


@pytest.mark.parametrize(
    "damage, words",
    [
        (lambda d: d[:1], "too short"),
        (lambda d: b"\x00\x02" + d[2:], "version 2"),
        (lambda d: d[:8], "too short"),
        (lambda d: d[:-1], "do not fit"),  # a truncated entry
        (lambda d: d[:6] + struct.pack(">i", -1) + d[10:], "do not fit"),
        (lambda d: d[:6] + struct.pack(">i", 3) + d[10:], "do not fit"),
        (lambda d: d[:2] + bytes([d[2] ^ 0x01]) + d[3:], "CRC-32C mismatch"),  # a flipped CRC byte
        (lambda d: d[:20] + bytes([d[20] ^ 0x80]) + d[21:], "CRC-32C mismatch"),  # a flipped entry bit
    ],
)
def test_what_kafka_refuses(damage, words):
    data = damage(format_snapshot([_entry(pid=1, txn=100), _entry(pid=2)]))
    with pytest.raises(SnapshotError, match=words) as caught:
        parse_snapshot_entries(data, "/p/00000000000000000042.snapshot")
    assert "/p/00000000000000000042.snapshot" in str(caught.value)
    with pytest.raises(SnapshotError):
        parse_snapshot(data, "s")


def test_trailing_bytes_under_a_valid_crc_are_read_as_kafka_reads_them():
    """``readSnapshot`` reads the entries its count names and checks the CRC over the whole file: bytes after
    the last entry are not refused."""
    body = format_snapshot([_entry()])[6:] + b"\xab\xcd"
    from indexlib.format.scan_kernel import crc32c_function

    data = struct.pack(">hI", 1, crc32c_function()(body)) + body
    assert parse_snapshot_entries(data, "s") == [_entry()]
    assert snapshot_trailing_bytes(data) == 2 and snapshot_trailing_bytes(EMPTY_SNAPSHOT) == 0


def test_kafka_order_is_java_hashmap_order():
    ids = [17, 1, 16, 2, 33, -1, 2**32 + 1]
    entries = [_entry(pid=p) for p in ids]
    # Long.hashCode then HashMap.hash: 17->1, 1->1, 16->0, 2->2, 33->1, -1->0, 2**32+1 -> 0 (table of 16)
    assert [e.producer_id for e in kafka_snapshot_order(entries)] == [16, -1, 2**32 + 1, 17, 1, 33, 2]
    assert [e.producer_id for e in kafka_snapshot_order(entries, capacity=32)] == [-1, 2**32 + 1, 1, 33, 2, 16, 17]
    with pytest.raises(ValueError):
        kafka_snapshot_order(entries, capacity=24)


_int = st.integers
_entries = st.lists(
    st.builds(
        ProducerSnapshotEntry,
        producer_id=_int(-(2**63), 2**63 - 1),
        epoch=_int(-(2**15), 2**15 - 1),
        last_sequence=_int(-(2**31), 2**31 - 1),
        last_offset=_int(-(2**63), 2**63 - 1),
        offset_delta=_int(-(2**31), 2**31 - 1),
        timestamp=_int(-(2**63), 2**63 - 1),
        coordinator_epoch=_int(-(2**31), 2**31 - 1),
        current_txn_first_offset=_int(-(2**63), 2**63 - 1),
    ),
    max_size=12,
)


@given(_entries)
def test_round_trip(entries):
    data = format_snapshot(entries)
    assert parse_snapshot_entries(data, "s") == entries
    assert format_snapshot(parse_snapshot_entries(data, "s")) == data
    assert parse_snapshot(data, "s") == {
        e.producer_id: e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0
    }


@requires_kafka_real
@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p and f"{p.parent.parent.name}/{p.parent.name}/{p.name}")
def test_every_real_snapshot_round_trips(path):
    """Parse then format gives the broker's bytes, and its entries are in the order ``kafka_snapshot_order`` gives
    (Kafka's producers ``HashMap``)."""
    data = path.read_bytes()
    if not written_by_kafka(path):
        pytest.skip(f"{path} is not the file its MANIFEST.json records (damaged fixture)")
    entries = parse_snapshot_entries(data, str(path))
    assert format_snapshot(entries) == data
    assert kafka_snapshot_order(entries) == entries


@requires_kafka_real
def test_a_hex_dump_of_a_snapshot_is_refused_as_kafka_refuses_it(tmp_path):
    """A real snapshot replaced by its ``xxd`` dump (text, as an older ``../shared`` held one) starts with
    ``"00"``, version 0x3030: Kafka's ``readSnapshot`` throws ``CorruptSnapshotException`` and the broker deletes it."""
    source = KAFKA_REAL / "local-apache-kafka-4.1.0" / "txn-0" / "00000000000000000011.snapshot"
    path = hex_dump_copy(source, tmp_path)
    with pytest.raises(SnapshotError, match="version 12336"):
        parse_snapshot_entries(path.read_bytes(), str(path))
