"""``verify --not-yet-tiered`` on a real broker's log dir as it was while tiering (the copy taken once every closed
segment was copied, the active ones still local): it verifies exactly the segments tiered storage has yet to copy,
finds a corrupt index among them before the broker would upload it, leaves the tiered ones out, takes a tiered
topic's whole log while nothing of it is tiered yet (the topic's ``remote.storage.enable`` in the cluster's
metadata), and says in one line when there is no metadata to read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ..broker.kafka_broker import copy_log_dir
from ..conftest import PROJECT_ROOT
from .tiered_broker import local_segments


def verify(*args: str, command: str = "indexlib") -> tuple[int, dict, str]:
    cmd = (
        ["-m", "indexlib", "verify"]
        if command == "indexlib"
        else ["-m", "jobs.cli", "verify", "--engine", "local", "--audit-table", "none"]
    )
    proc = subprocess.run(
        [sys.executable, *cmd, *args, "--not-yet-tiered", "--json", "-"], capture_output=True, text=True,
        cwd=PROJECT_ROOT, timeout=300,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout) if proc.stdout.startswith("{") else {}, proc.stderr


def chosen(report: dict) -> set[tuple[str, int, int]]:
    return {(s["topic"], s["partition"], s["base_offset"]) for s in report["segments"]}


def test_only_the_segments_waiting_for_their_copy_are_verified(tiered_kafka, tmp_path):
    log_dir = copy_log_dir(tiered_kafka.before_local_delete, tmp_path / "logs")
    waiting = {
        (tp.rpartition("-")[0], int(tp.rpartition("-")[2]), local_segments(log_dir, tp)[-1])
        for tp in tiered_kafka.copied
    }
    code, report, err = verify(str(log_dir))
    assert code == 0, err
    assert chosen(report) == waiting
    code, report, err = verify("--log-dir", str(log_dir), command="kafka-index")
    assert code == 0, err
    assert chosen(report) == waiting
    # a torn index in a waiting segment is found; one in a segment already tiered is not this run's
    topic, partition, base = sorted(waiting)[0]
    waiting_index = log_dir / f"{topic}-{partition}" / f"{base:020d}.index"
    tiered_index = log_dir / f"{topic}-{partition}" / f"{local_segments(log_dir, f'{topic}-{partition}')[0]:020d}.index"
    for index in (waiting_index, tiered_index):
        with open(index, "r+b") as f:
            f.truncate(7)
    code, report, err = verify(str(log_dir))
    assert code == 1, err
    files = {f["file"] for s in report["segments"] for f in s["findings"]}
    assert str(waiting_index) in files and str(tiered_index) not in files


def test_a_tiered_topic_with_nothing_tiered_yet_is_verified_whole(tiered_kafka, tmp_path):
    log_dir = copy_log_dir(tiered_kafka.before_local_delete, tmp_path / "logs")
    for log in log_dir.glob("__remote_log_metadata-*/*.log"):
        log.write_bytes(b"")  # no copy recorded yet
    code, report, err = verify(str(log_dir))
    assert code == 0, err
    expected = {
        (tp.rpartition("-")[0], int(tp.rpartition("-")[2]), base)
        for tp in tiered_kafka.copied
        for base in local_segments(log_dir, tp)
    }
    assert chosen(report) == expected  # topics known as tiered from the cluster's metadata alone


def test_no_remote_log_metadata_is_one_line_and_exit_2(tiered_kafka, tmp_path):
    log_dir = copy_log_dir(tiered_kafka.before_local_delete, tmp_path / "logs")
    for part in list(log_dir.glob("__remote_log_metadata-*")):
        subprocess.run(["rm", "-r", str(part)], check=True)
    code, _, err = verify(str(log_dir))
    assert code == 2 and err.count("\n") == 1
    assert "no __remote_log_metadata-N partition dir" in err and "--remote-log-metadata" in err
    code, report, err = verify(str(log_dir), "--remote-log-metadata", str(tiered_kafka.before_local_delete))
    assert code == 0 and chosen(report), err
    assert Path(report["segments"][0]["log_dir"]) == log_dir
