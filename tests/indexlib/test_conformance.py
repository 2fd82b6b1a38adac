"""Conformance: rebuilding every real partition gives Kafka 4.1.0's own rebuilt index files, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from indexlib.engine import rebuild_partition
from indexlib.format.layout import segment_base_offsets

from ..conftest import KAFKA_REAL, requires_kafka_real

ORACLE = "_rebuilt_by_kafka_4.1.0"
SUFFIXES = (".index", ".timeindex", ".txnindex")


def partitions() -> list[Path]:
    if not KAFKA_REAL.is_dir():
        return []
    found = []
    for set_dir in sorted(p for p in KAFKA_REAL.iterdir() if p.is_dir()):
        for part in sorted(p for p in set_dir.iterdir() if p.is_dir() and p.name != ORACLE):
            if any(part.glob("*.log")):
                found.append(part)
    return found


def expected_files(part: Path) -> dict[str, bytes]:
    oracle = part.parent / ORACLE / part.name
    source = oracle if (part.parent / ORACLE).is_dir() else part
    return {p.name: p.read_bytes() for p in sorted(source.iterdir()) if p.suffix in SUFFIXES}


@requires_kafka_real
def test_every_set_is_covered():
    sets = {p.parent.name for p in partitions()}
    assert "local-apache-kafka-4.1.0" in sets and len(sets) >= 8


@requires_kafka_real
@pytest.mark.parametrize("part", partitions(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_rebuild_equals_kafka(part, tmp_path):
    before = {p.name: p.stat().st_mtime_ns for p in part.iterdir()}
    result = rebuild_partition(part, output_dir=tmp_path)
    out = tmp_path / part.name
    produced = {p.name: p.read_bytes() for p in sorted(out.iterdir()) if p.suffix in SUFFIXES}
    expected = expected_files(part)
    assert expected, f"no expected index files for {part}"
    bases = segment_base_offsets(part)
    # Compare only the segments that the oracle covers (the GitHub sets keep segments with all files).
    covered = {int(name.split(".")[0]) for name in expected}
    produced = {k: v for k, v in produced.items() if int(k.split(".")[0]) in covered}
    assert covered <= set(bases)
    assert sorted(produced) == sorted(expected)
    for name in expected:
        assert produced[name] == expected[name], name
    assert all(seg.fatal is None for seg in result.segments)
    assert {p.name: p.stat().st_mtime_ns for p in part.iterdir()} == before  # the input is only read
