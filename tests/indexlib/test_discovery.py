"""Discovery of a broker's partitions and segments, and the --partitions selection."""

from __future__ import annotations

import pytest

from indexlib.storage.discovery import discover, discover_partition_dir, parse_partition_filter


def test_partition_selection():
    chosen = parse_partition_filter("0,3,5-7")
    assert [n for n in range(10) if n in chosen] == [0, 3, 5, 6, 7]
    everything = parse_partition_filter("0-2147483647")  # kept as a range, never a set of 2^31 numbers
    assert 2147483647 in everything and -1 not in everything and everything.ranges == ((0, 2147483647),)
    for bad in ("7-5", "3-", "-3", "x", "0-2147483648", ""):
        with pytest.raises(ValueError, match="--partitions: "):
            parse_partition_filter(bad)


def test_discovery_skips_kafka_special_dirs(tmp_path):
    for name in ("orders-0", "orders-1", "orders-0.abc-delete", "orders-2.abc-future", "x-3.q-stray", "notapartition"):
        (tmp_path / name).mkdir()
    (tmp_path / "orders-0" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "orders-0" / "00000000000000000000.log.swap").write_bytes(b"")
    (tmp_path / "meta.properties").write_text("x")
    found = discover([str(tmp_path)], partitions=parse_partition_filter("0"))
    assert [p.name for p in found.partitions] == ["orders-0"]
    assert found.partitions[0].segments[0].active
    reasons = {p.split("/")[-1]: r for p, r in found.skipped}
    assert set(reasons) == {
        "orders-0.abc-delete",
        "orders-2.abc-future",
        "x-3.q-stray",
        "notapartition",
        "00000000000000000000.log.swap",
    }


def test_one_partition_dir_by_its_path(tmp_path):
    part = tmp_path / "logs" / "orders-3"
    part.mkdir(parents=True)
    for base in (0, 40):
        (part / f"{base:020d}.log").write_bytes(b"x" * (base + 1))
    found = discover_partition_dir(str(part))
    (p,) = found.partitions
    assert (p.topic, p.partition, p.log_dir) == ("orders", 3, str(tmp_path / "logs")) and found.log_dirs == [p.log_dir]
    assert [(s.base_offset, s.size, s.active) for s in p.segments] == [(0, 1, False), (40, 41, True)]
    with pytest.raises(ValueError, match="not a Kafka partition directory"):
        discover_partition_dir(str(tmp_path / "logs"))
    with pytest.raises(ValueError, match="no such partition dir"):
        discover_partition_dir(str(tmp_path / "nope-1"))
