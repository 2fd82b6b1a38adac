"""The dump command of both command lines: several files, JSON arrays, --check (Kafka's sanity rules and verify's
checks), bad input, and the same answers from ``python -m indexlib dump`` and ``kafka-index dump``."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from indexlib.cli.dump import check_index_file, dump_file
from indexlib.cli.main import main
from indexlib.engine import rebuild_partition
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, requires_kafka_real


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["dump", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def partition(tmp_path):
    """A generated, rebuilt partition of two segments (with its index files)."""
    part = tmp_path / "orders-0"
    generate_partition(part, segments=2, batches_per_segment=60, transactional_producers=2, seed=5)
    rebuild_partition(part, index_interval_bytes=500)
    return part


def test_several_files_in_turn_and_as_one_json_array(capsys, partition):
    index, log = partition / f"{0:020d}.index", partition / f"{0:020d}.log"
    code, out, _ = run(capsys, index, log, "--deep-iteration")
    assert code == 0
    assert out.count("Dumping ") == 2 and "| offset: 0 " in out
    code, out, _ = run(capsys, index, log, "--json")
    assert code == 0 and json.loads(out) == [dump_file(index), dump_file(log)]


def test_a_bad_file_among_several_is_one_line_and_exit_2(capsys, partition):
    index = partition / f"{0:020d}.index"
    code, out, err = run(capsys, partition / "nope.index", index, partition / "x.log")
    assert code == 2 and out.count("Dumping ") == 1
    lines = err.splitlines()
    assert len(lines) == 2 and all(line.startswith("python -m indexlib: error: ") for line in lines)
    assert "nope.index" in lines[0] and "x.log" in lines[1]
    code, out, err = run(capsys, index, "--max-bytes", "-1")
    assert code == 2 and err.strip() == "python -m indexlib: error: --max-bytes must be at least 0, got -1"
    code, _, err = run(capsys, index, "--check", "--json")
    assert code == 2 and "--check" in err


def test_check_passes_a_good_index_and_fails_a_scrambled_one_with_exit_1(capsys, partition):
    index, timeindex = partition / f"{0:020d}.index", partition / f"{0:020d}.timeindex"
    code, out, _ = run(capsys, index, timeindex, "--check")
    assert code == 0
    assert f"{index} passed sanity check." in out and f"{index} passed verify's checks against its .log." in out
    entries = np.frombuffer(index.read_bytes(), dtype=">u4").reshape(-1, 2).copy()
    entries[[0, -1]] = entries[[-1, 0]]  # scrambled: Kafka's sanity rule still passes, verify's checks do not
    index.write_bytes(entries.tobytes())
    code, out, _ = run(capsys, index, "--check")
    assert code == 1 and f"{index} passed sanity check." in out and "\nerror " in out
    assert run(capsys, index)[0] == 0  # a plain dump of it still shows its entries with exit 0, as before


def test_check_applies_kafkas_sanity_rules(capsys, tmp_path):
    index = tmp_path / f"{100:020d}.index"
    index.write_bytes(np.array([[5, 0], [0, 0]], dtype=">u4").tobytes())
    # last entry's offset is the base (a zero tail): passes, as in Kafka >= 2.0; no .log beside it
    code, out, _ = run(capsys, index, "--check")
    assert code == 0 and "verify's checks not run (no 00000000000000000100.log beside it)" in out
    index.write_bytes(index.read_bytes() + b"\x00" * 3)
    code, out, _ = run(capsys, index, "--check")
    assert code == 1 and "failed sanity check" in out and "not a multiple of 8" in out
    timeindex = tmp_path / f"{100:020d}.timeindex"
    timeindex.write_bytes(np.array([(50, 1), (40, 2)], dtype=[("t", ">i8"), ("o", ">i4")]).tobytes())
    result = check_index_file(str(timeindex))
    assert result.failed and "below the first timestamp" in result.sanity


@requires_kafka_real
def test_check_of_every_real_index_file_passes():
    """Every index file a real broker wrote passes Kafka's rules and verify's checks (the .txnindex through the
    partition's replay)."""
    checked = 0
    for path in sorted(KAFKA_REAL.glob("local-apache-kafka-4.1.0/*/*index")):
        result = check_index_file(str(path))
        assert not result.failed, (path, result)
        assert result.verify_skipped is None
        checked += 1
    assert checked > 60


def test_both_command_lines_dump_alike(capsys, partition):
    from jobs.cli import main as jobs_main

    log = partition / f"{0:020d}.log"
    argv = ["dump", str(log), str(partition / f"{0:020d}.index"), "--print-data-log", "--payload-format", "hex"]
    assert main(argv) == 0
    library = capsys.readouterr().out
    assert jobs_main(argv) == 0
    assert capsys.readouterr().out == library
    assert jobs_main([*argv, "--check"]) == 2
    assert "kafka-index: error: --check" in capsys.readouterr().err


#: ``python -m indexlib`` run as a whole process that prints its own peak resident memory (KiB) last on stderr:
#: ``VmHWM``, this program's alone (``getrusage``'s ``ru_maxrss`` keeps, across ``exec``, the peak of the process
#: that forked it: a test suite's, hundreds of MiB by its end)
PEAK_REPORTING_MAIN = """if True:
    import runpy, sys
    sys.argv = ["python -m indexlib", *sys.argv[1:]]
    try:
        runpy.run_module("indexlib", run_name="__main__")
    finally:
        status = open("/proc/self/status").read().splitlines()
        print(next(line.split()[1] for line in status if line.startswith("VmHWM:")), file=sys.stderr)
"""


def _max_rss_mib(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str, float]:
    """``python -m indexlib ARGS`` as a whole process: its exit code, stdout, stderr and peak resident MiB."""
    import subprocess
    import sys

    from ..conftest import PROJECT_ROOT

    done = subprocess.run([sys.executable, "-c", PEAK_REPORTING_MAIN, *args], cwd=PROJECT_ROOT, capture_output=True,
                          text=True, timeout=300, env=None if env is None else {**os.environ, **env})  # fmt: skip
    *err, peak = done.stderr.rstrip("\n").split("\n")
    return done.returncode, done.stdout, "\n".join(err), int(peak) / 1024


def test_dump_memory_is_bounded_by_what_it_reads_on_huge_sparse_files(tmp_path):
    """Issue 37: an 8 GiB ``.log`` with ``--max-bytes 100``, a 4 GiB ``.index`` and a 2 GiB ``.snapshot`` (sparse:
    no disk used) are dumped in a few tens of MiB, not their size; the index that big fails ``--check`` (Kafka cannot
    map more than 2^31 - 1 bytes); ``--max-bytes 0`` says the walk stopped there, not that the file is empty."""
    part = tmp_path / "t-0"
    part.mkdir()
    base = part / "00000000000000000000"
    for suffix, size in ((".log", 8 << 30), (".index", 4 << 30), (".snapshot", 2 << 30)):
        with open(f"{base}{suffix}", "wb") as f:
            f.truncate(size)
    dump = ["dump"]
    code, out, _, mib = _max_rss_mib([*dump, f"{base}.log", "--max-bytes", "100"])
    assert code == 1 and "size_below_minimum" in out and mib < 300, (code, mib)
    code, out, _, mib = _max_rss_mib([*dump, f"{base}.index"])
    assert code == 0 and "1 entry" in out and mib < 300, (code, mib)
    alone = tmp_path / "u-0"  # no .log beside it: the check is Kafka's rules alone (verify would scan 8 GiB of .log)
    alone.mkdir()
    os.link(f"{base}.index", alone / "00000000000000000000.index")
    code, out, _, mib = _max_rss_mib([*dump, str(alone / "00000000000000000000.index"), "--check"])
    assert code == 1 and "more than the 2147483647 Kafka can map" in out and mib < 300, (code, out[-500:], mib)
    code, _, err, mib = _max_rss_mib([*dump, f"{base}.snapshot"])
    assert code == 2 and "snapshot version 0, expected 1" in err and mib < 300, (code, mib)
    generate_partition(tmp_path / "g-0", segments=1, batches_per_segment=5, seed=1)
    data = dump_file(tmp_path / "g-0" / "00000000000000000000.log")
    assert data["end"]["stop"] == "end" and data["batch_count"] == 5
    from indexlib.cli.dump import DumpOptions

    cut = dump_file(tmp_path / "g-0" / "00000000000000000000.log", DumpOptions(max_bytes=0))
    assert cut["batch_count"] == 0 and cut["end"]["stop"] == "max_bytes"


def test_a_preallocated_log_is_read_up_to_its_hole(tmp_path):
    """A ``.log`` of one batch followed by an 8 GiB hole (what ``log.preallocate=true`` leaves of an active segment
    at a crash): verify (compiled and pure-Python scan) and a whole dump read its stored bytes, not the hole: tens of
    MiB and a fraction of a second, where mapping it with read-ahead and reading its zeros took 8 GiB."""
    from indexlib.testing.batch_encoder import encode_batch_v2

    part = tmp_path / "t-0"
    part.mkdir()
    log = part / "00000000000000000000.log"
    batch = encode_batch_v2(0, [(b"k", b"v" * 100, 1_700_000_000_000)])
    with open(log, "wb") as f:
        f.write(batch)
        f.truncate(8 << 30)
    for pure in ("0", "1"):
        code, out, _, mib = _max_rss_mib(["verify", str(tmp_path)], {"KAFKA_INDEX_PURE_PYTHON": pure})
        assert code == 1 and "log_zero_tail" in out and mib < 300, (pure, code, mib, out[-800:])
        assert f"Kafka's recovery would truncate the last {(8 << 30) - len(batch)}" in out
    code, out, _, mib = _max_rss_mib(["dump", str(log)])
    assert code == 1 and out.count("baseOffset: ") == 1 and mib < 300, (code, mib)
