"""Offset checkpoints and ``leader-epoch-checkpoint`` (``indexlib.format.checkpoint``,
``indexlib.format.leader_epoch_checkpoint``): Kafka's read rules (``CheckpointReadBuffer``), the text it writes,
the leader-epoch cache's load and truncations, and a round trip of every file real brokers wrote."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from indexlib.format.checkpoint import (
    CheckpointError,
    format_offset_checkpoint,
    java_lines,
    java_parse_int,
    parse_offset_checkpoint,
)
from indexlib.format.leader_epoch_checkpoint import (
    EpochEntry,
    LeaderEpochProblem,
    check_leader_epoch_checkpoint,
    format_leader_epoch_checkpoint,
    load_leader_epochs,
    parse_leader_epoch_checkpoint,
    truncate_from_end,
    truncate_from_start,
    validate_leader_epochs,
)

from ..conftest import KAFKA_REAL, requires_kafka_real

OFFSET_CHECKPOINTS = sorted(
    path
    for name in (
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
    )
    for path in KAFKA_REAL.glob(f"*/{name}")
) or [None]
LEADER_EPOCH_CHECKPOINTS = sorted(KAFKA_REAL.glob("*/*/leader-epoch-checkpoint")) or [None]


def _text(path) -> str:
    with open(path, encoding="utf-8", newline="") as file:  # no newline translation: the bytes as Kafka wrote them
        return file.read()


# ------------------------------------------------------------------------------------------- offset checkpoints
@pytest.mark.parametrize("text", ["", "0", "0\n", "0\r\n", "0\n0\n", "+0\n0\n"])
def test_an_empty_or_headless_checkpoint_has_no_entries(text):
    """A 0-byte file (what ``CheckpointFile``'s constructor creates before the first write), or a version line
    without a count line, is read as empty by Kafka: not malformed."""
    assert parse_offset_checkpoint(text, "cp") == {}


def test_entries_keep_file_order_and_parse_like_java():
    text = "0\n3\nb 1 20\na\t0   10 \n_x.y-z 7 -1\n"
    assert list(parse_offset_checkpoint(text, "cp").items()) == [(("b", 1), 20), (("a", 0), 10), (("_x.y-z", 7), -1)]


@pytest.mark.parametrize(
    "text, words",
    [
        ("1\n0\n", "version 1"),
        ("x\n", "malformed line"),
        (" 0\n0\n", "malformed line"),
        ("0\nfoo\n", "malformed line"),
        ("0\n1_0\n", "malformed line"),
        ("0\n-1\n", "negative entry count"),
        ("0\n2\na 0 1\n", "expected 2 entries"),
        ("0\n0\na 0 1\n", "expected 0 entries"),
        ("0\n1\na 0 1\n\n", "malformed line"),  # an empty line is an entry line, and a bad one
        ("0\n1\n a 0 1\n", "malformed line"),  # a leading blank makes a fourth, empty, field
        ("0\n1\na 0\n", "malformed line"),
        ("0\n1\na 0 1 2\n", "malformed line"),
        ("0\n1\na x 1\n", "malformed line"),
        ("0\n1\na 2147483648 1\n", "malformed line"),
        ("0\n1\na 0 9223372036854775808\n", "malformed line"),
    ],
)
def test_what_kafka_refuses_is_a_checkpoint_error(text, words):
    with pytest.raises(CheckpointError, match=words) as caught:
        parse_offset_checkpoint(text, "/d/recovery-point-offset-checkpoint")
    assert "/d/recovery-point-offset-checkpoint" in str(caught.value)


def test_lines_and_integers_as_java_reads_them():
    assert java_lines("a\r\nb\rc\nd") == ["a", "b", "c", "d"]
    assert java_lines("a\n\n") == ["a", ""]
    assert java_lines("a\x0bb\x1cc") == ["a\x0bb\x1cc"]  # only \n and \r end a line in Java
    assert java_parse_int("-2147483648", 32) == -(2**31)
    for bad in ("", "+", "1 ", "0x1", "1_0", "2147483648"):
        with pytest.raises(ValueError):
            java_parse_int(bad, 32)


def test_format_writes_what_kafka_writes():
    assert format_offset_checkpoint({}) == "0\n0\n"
    assert format_offset_checkpoint({("t", 3): 42, ("a", 0): 0}) == "0\n2\nt 3 42\na 0 0\n"
    assert format_offset_checkpoint([(("t", 1), 5)]) == "0\n1\nt 1 5\n"
    for topic in ("a b", ""):
        with pytest.raises(CheckpointError):
            format_offset_checkpoint({(topic, 0): 1})


_topics = st.text(alphabet="abcxyz._-0123456789", min_size=1, max_size=20)
_offsets = st.dictionaries(st.tuples(_topics, st.integers(0, 2**31 - 1)), st.integers(-(2**63), 2**63 - 1), max_size=30)


@given(_offsets)
def test_offset_checkpoint_round_trip(offsets):
    text = format_offset_checkpoint(offsets)
    assert parse_offset_checkpoint(text, "cp") == offsets
    assert format_offset_checkpoint(parse_offset_checkpoint(text, "cp")) == text


@requires_kafka_real
@pytest.mark.parametrize("path", OFFSET_CHECKPOINTS, ids=lambda p: p and f"{p.parent.name}/{p.name}")
def test_every_real_offset_checkpoint_round_trips(path):
    """Kafka writes entries in its ``AnyRefMap``'s hash order; parsing keeps the file's order, so formatting gives
    the file back. A 0-byte file (a checkpoint created and never written, e.g. the cleaner's) is empty."""
    text = _text(path)
    offsets = parse_offset_checkpoint(text, str(path))
    if text:
        assert format_offset_checkpoint(offsets) == text
    else:
        assert offsets == {}


# ------------------------------------------------------------------------------------- leader-epoch-checkpoint
def test_leader_epoch_parse_and_format():
    text = "0\n3\n0 0\n2 150\n5 151\n"
    entries = parse_leader_epoch_checkpoint(text, "lec")
    assert entries == [EpochEntry(0, 0), EpochEntry(2, 150), EpochEntry(5, 151)]
    assert format_leader_epoch_checkpoint(entries) == text
    assert parse_leader_epoch_checkpoint("", "lec") == []
    assert format_leader_epoch_checkpoint([]) == "0\n0\n"


@pytest.mark.parametrize(
    "text, words",
    [
        ("1\n0\n", "version 1"),
        ("0\n1\n0 0 0\n", "malformed line"),
        ("0\n1\n2147483648 0\n", "malformed line"),
        ("0\n2\n0 0\n", "expected 2 entries"),
        ("0\n1\n-1 0\n", "invalid leader epoch entry"),  # assign() throws IllegalArgumentException on load
        ("0\n1\n0 -5\n", "invalid leader epoch entry"),
    ],
)
def test_leader_epoch_refusals(text, words):
    with pytest.raises(CheckpointError, match=words):
        parse_leader_epoch_checkpoint(text, "lec")
    [problem] = check_leader_epoch_checkpoint(text, "lec")
    assert problem.kind == "malformed" and problem.index is None


@pytest.mark.parametrize(
    "entries, kinds",
    [
        ([(0, 0), (1, 10), (2, 20)], []),
        ([(0, 0), (2, 10), (1, 20)], [("epoch_not_increasing", 2)]),  # an epoch out of order
        ([(0, 0), (1, 10), (1, 20)], [("epoch_not_increasing", 2)]),
        ([(0, 0), (1, 10), (2, 10)], [("start_offset_not_increasing", 2)]),
        ([(0, 5), (1, 4)], [("start_offset_not_increasing", 1)]),
        ([(3, 5), (1, 4)], [("epoch_not_increasing", 1), ("start_offset_not_increasing", 1)]),
    ],
)
def test_leader_epoch_problems(entries, kinds):
    epochs = [EpochEntry(*e) for e in entries]
    problems = validate_leader_epochs(epochs)
    assert [(p.kind, p.index) for p in problems] == kinds
    assert all(isinstance(p, LeaderEpochProblem) and p.message for p in problems)
    assert check_leader_epoch_checkpoint(format_leader_epoch_checkpoint(epochs), "lec") == problems


def test_load_applies_kafkas_assign():
    """``LeaderEpochFileCache``'s constructor assigns each line: the same epoch at a later offset is skipped, an
    entry not above the newest ones removes them (``maybeTruncateNonMonotonicEntries``)."""
    e = EpochEntry
    assert load_leader_epochs([e(0, 0), e(1, 10), e(1, 12)]) == [e(0, 0), e(1, 10)]
    assert load_leader_epochs([e(0, 0), e(1, 10), e(1, 8)]) == [e(0, 0), e(1, 8)]
    assert load_leader_epochs([e(0, 0), e(2, 10), e(1, 20)]) == [e(0, 0), e(1, 20)]
    assert load_leader_epochs([e(0, 0), e(1, 10), e(2, 10)]) == [e(0, 0), e(2, 10)]
    assert load_leader_epochs([e(3, 50), e(4, 60), e(5, 40)]) == [e(5, 40)]
    with pytest.raises(CheckpointError):
        load_leader_epochs([e(-1, 0)])


def test_truncations():
    e = EpochEntry
    cache = [e(0, 0), e(2, 100), e(4, 250)]
    assert truncate_from_end(cache, 250) == [e(0, 0), e(2, 100)]
    assert truncate_from_end(cache, 251) == cache
    assert truncate_from_end(cache, 100) == [e(0, 0)]
    assert truncate_from_end(cache, -1) == cache
    assert truncate_from_start(cache, 0) == cache  # (0, 0) is removed and put back unchanged
    assert truncate_from_start(cache, 120) == [e(2, 120), e(4, 250)]
    assert truncate_from_start(cache, 100) == [e(2, 100), e(4, 250)]
    assert truncate_from_start(cache, 300) == [e(4, 300)]
    assert truncate_from_start([], 5) == []


_monotonic_epochs = st.lists(st.tuples(st.integers(1, 5), st.integers(1, 1000)), max_size=20).map(
    lambda steps: [
        EpochEntry(sum(s[0] for s in steps[: i + 1]), sum(s[1] for s in steps[: i + 1])) for i in range(len(steps))
    ]
)


@given(_monotonic_epochs)
def test_leader_epoch_round_trip(entries):
    text = format_leader_epoch_checkpoint(entries)
    assert parse_leader_epoch_checkpoint(text, "lec") == entries
    assert validate_leader_epochs(entries) == []
    assert load_leader_epochs(entries) == entries


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 500)), max_size=20))
def test_loaded_cache_is_what_kafka_could_have_written(pairs):
    loaded = load_leader_epochs(EpochEntry(*p) for p in pairs)
    assert validate_leader_epochs(loaded) == []
    assert load_leader_epochs(loaded) == loaded


@requires_kafka_real
@pytest.mark.parametrize(
    "path", LEADER_EPOCH_CHECKPOINTS, ids=lambda p: p and f"{p.parent.parent.name}/{p.parent.name}"
)
def test_every_real_leader_epoch_checkpoint_round_trips_without_problem(path):
    text = _text(path)
    entries = parse_leader_epoch_checkpoint(text, str(path))
    assert format_leader_epoch_checkpoint(entries) == text
    assert check_leader_epoch_checkpoint(text, str(path)) == []
    assert load_leader_epochs(entries) == entries


def test_the_log_start_offsets_are_read_again_only_from_a_changed_file(tmp_path):
    """``read_log_start_offset`` parses a log dir's checkpoint once for all its partitions (issue 24: 2000
    partitions re-parsing a 2000-line file took 20 s), and again whenever the file is replaced (as Kafka writes
    it: a rename) or rewritten in place."""
    import os

    from indexlib.format.checkpoint import CheckpointError
    from indexlib.storage.partition_files import read_log_start_offset

    path = tmp_path / "log-start-offset-checkpoint"
    assert read_log_start_offset(tmp_path, "t", 0) == 0  # absent
    path.write_text("0\n2\nt 0 5\nt 1 7\n")
    assert [read_log_start_offset(tmp_path, "t", p) for p in (0, 1, 2)] == [5, 7, 0]
    (tmp_path / "new").write_text("0\n1\nt 0 9\n")
    os.replace(tmp_path / "new", path)
    assert [read_log_start_offset(tmp_path, "t", p) for p in (0, 1)] == [9, 0]
    path.write_text("0\n1\nt 0 10\n")  # in place, another size
    assert read_log_start_offset(tmp_path, "t", 0) == 10
    path.write_text("0\n1\nt 0 11\n")  # in place, the same size: its times move
    os.utime(path, ns=(1, 1))
    assert read_log_start_offset(tmp_path, "t", 0) == 11
    path.write_text("0\n3\nt 0 1\n")
    with pytest.raises(CheckpointError):
        read_log_start_offset(tmp_path, "t", 0)
    path.unlink()
    assert read_log_start_offset(tmp_path, "t", 0) == 0
