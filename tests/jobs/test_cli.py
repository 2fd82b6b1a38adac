"""``kafka-index``'s commands that need no Spark: lookup (text and JSON) and dump, in process; they are
the library's (``python -m indexlib lookup|dump``), so both command lines print the same."""

from __future__ import annotations

import json
import re

from indexlib.dump import dump_file
from indexlib.generate import generate_partition
from indexlib.partition import rebuild_partition
from jobs.cli import main


def test_lookup_prints_the_entry_used_and_the_batch_found(capsys, tmp_path):
    part = tmp_path / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=50, seed=3)
    rebuild_partition(part, index_interval_bytes=2000)
    log = part / "00000000000000000000.log"
    batches = dump_file(log)["batches"]
    target = batches[30]
    assert main(["lookup", "--segment", str(log), "--offset", str(target["last_offset"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"offset index entry: offset \d+ -> byte \d+", out[0])
    assert out[1].startswith(f"offset {target['last_offset']}: batch at byte {target['position']} ")
    assert f"(offsets {target['base_offset']}..{target['last_offset']}" in out[1]
    assert main(["lookup", "--segment", str(log), "--timestamp", str(target["max_timestamp"])]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("time index entry: ") and out[2].startswith(f"timestamp {target['max_timestamp']}: ")
    past = batches[-1]["last_offset"] + 10
    assert main(["lookup", "--segment", str(log), "--offset", str(past)]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == f"offset {past}: not in this segment"
    assert main(["lookup", "--segment", str(log), "--offset", str(past), "--json"]) == 1  # one exit-code rule
    assert json.loads(capsys.readouterr().out)["batch"] is None


def test_dump_is_the_librarys(capsys, tmp_path):
    part = tmp_path / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=20, seed=4)
    rebuild_partition(part)
    index = part / "00000000000000000000.timeindex"
    assert main(["dump", str(index), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == dump_file(index)


def test_both_command_lines_answer_a_lookup_alike(capsys, tmp_path):
    from indexlib.cli import main as indexlib_main

    part = tmp_path / "orders-0"
    generate_partition(part, segments=1, batches_per_segment=30, seed=5)
    rebuild_partition(part, index_interval_bytes=1000)
    log = str(part / "00000000000000000000.log")
    for argv in (["--offset", "17"], ["--timestamp", "0", "--json"], ["--offset", "100000"]):
        code = main(["lookup", "--segment", log, *argv])
        ours = capsys.readouterr().out
        assert indexlib_main(["lookup", "--segment", log, *argv]) == code
        assert capsys.readouterr().out == ours
