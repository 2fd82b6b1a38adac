"""The repair of a tiered segment's index, end to end against a real Kafka 4.1.0 broker reading it back through
its own ``RemoteIndexCache`` (Kafka's layout in a dir): what consumers see is the oracle.

1. The broker serves every partition from the start (tiered segments only: their local copies are gone): the
   baseline, read_committed, and offsets for timestamps. Its cache now holds the good copies.
2. One remote ``.index`` entry is made to point one batch too far. ``remote-index-cache`` sees the cached copy is no
   longer the object (stale); ``--repair`` is refused while the broker runs, and removes the entry once it stopped.
3. The broker now hands a consumer fetching from that entry's offset a later batch: records silently skipped.
4. ``verify-remote --full`` finds the entry, ``rebuild-remote`` stages the broker's own bytes, the staged object is
   copied over the live one, ``remote-index-cache --repair`` drops the damaged cached copy.
5. The broker serves exactly the baseline again: every record of the damaged segment, no aborted one, the same
   offsets for timestamps.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import sys

import pytest

from ..broker.kafka_broker import serve
from ..conftest import PROJECT_ROOT
from .tiered_broker import rsm_missing, start_tiered, tier

pytestmark = pytest.mark.skipif(rsm_missing() is not None, reason=rsm_missing() or "")


def command(name: str, *args: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [sys.executable, "-m", "indexlib", name, *args, "--json"], capture_output=True, text=True, cwd=PROJECT_ROOT,
        timeout=300,
    )  # fmt: skip
    return proc.returncode, json.loads(proc.stdout) if proc.stdout else {}, proc.stderr


def first_offset_from(bootstrap: str, topic: str, partition: int, offset: int) -> int:
    """The offset of the first record a read_committed consumer is handed when it fetches from ``offset``."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False, isolation_level="read_committed",
        fetch_max_wait_ms=50, request_timeout_ms=30000,
    )  # fmt: skip
    try:
        tp = TopicPartition(topic, partition)
        consumer.assign([tp])
        consumer.seek(tp, offset)
        for _ in range(120):
            for records in consumer.poll(timeout_ms=500, max_records=1).values():
                return records[0].offset
        raise AssertionError(f"nothing fetched from {topic}-{partition} at {offset}")
    finally:
        consumer.close()


def test_a_repaired_remote_index_is_served_exactly_after_the_swap_and_the_cache_purge(rsm_jar, tmp_path):
    run = tier(tmp_path / "tiered", "kafka", rsm_jar)
    broker, remote = run.broker, run.remote_dir
    assert broker is not None and remote is not None
    partitions = [(tp.rpartition("-")[0], int(tp.rpartition("-")[2])) for tp in sorted(run.copied)]
    cache = str(run.log_dir)
    common = ["--log-dir", str(run.log_dir), "--remote", str(remote), "--layout", "kafka"]
    try:
        # 1. the baseline, through the remote indexes only
        start_tiered(broker)
        baseline = serve(broker.bootstrap, partitions)
        assert all(s.count and s.start == 0 for s in baseline.values())
        broker.stop()
        code, report, err = command("remote-index-cache", "--cache", cache, *common)
        assert code == 0 and report["entries"] >= len(run.copied), err  # every tiered segment read, none wrong

        # 2. one entry one batch too far: the cached copy is now stale
        (tp_dir,) = (remote / "kafka-tiered-storage").glob("plain-0-*")
        index = sorted(tp_dir.glob("*.index"))[1]
        original = index.read_bytes()
        data = bytearray(original)
        rel, _ = struct.unpack_from(">ii", data, 2 * 8)
        struct.pack_into(">i", data, 2 * 8 + 4, struct.unpack_from(">i", data, 3 * 8 + 4)[0])
        index.write_bytes(bytes(data))
        target = int(index.name.split("-")[0]) + rel
        code, report, err = command("remote-index-cache", "--cache", cache, *common)
        assert code == 1, err
        assert {f["kind"] for f in report["findings"]} == {"remote_cache_stale"}
        assert [f["file"].rsplit("/", 1)[1] for f in report["findings"]] == [
            f"{int(index.name.split('-')[0])}_{index.name.split('-', 1)[1].removesuffix('.index')}.index"
        ]
        start_tiered(broker)
        code, _, err = command("remote-index-cache", "--cache", cache, *common, "--repair")
        assert code == 2 and "stop the broker" in err  # its .lock is held: nothing removed under a running broker
        broker.stop()
        code, report, err = command("remote-index-cache", "--cache", cache, *common, "--repair")
        assert code == 0 and len(report["removed"]) == 3, err  # the entry's three files

        # 3. the broker follows the damaged entry: records silently skipped
        start_tiered(broker)
        skipped_to = first_offset_from(broker.bootstrap, "plain", 0, target)
        assert skipped_to > target
        broker.stop()

        # 4. found, rebuilt, swapped, purged
        code, report, err = command("verify-remote", *common, "--full")
        assert code == 1, err
        assert {f["file"] for o in report["outcomes"] for f in o["findings"]} == {str(index)}
        staging = tmp_path / "staging"
        code, report, err = command("rebuild-remote", *common, "--output-uri", str(staging))
        assert code == 0 and report["rebuilt"] == 1, err
        (staged,) = [p for p in staging.rglob("*") if p.is_file()]
        assert staged.read_bytes() == original
        shutil.copyfile(staged, remote / staged.relative_to(staging))
        code, report, err = command("remote-index-cache", "--cache", cache, *common, "--repair")
        assert code == 0 and len(report["removed"]) == 3, err
        code, report, err = command("verify-remote", *common, "--full")
        assert code == 0, err

        # 5. served exactly as before the damage
        start_tiered(broker)
        assert first_offset_from(broker.bootstrap, "plain", 0, target) == target
        after = serve(broker.bootstrap, partitions)
        assert after == baseline
        broker.stop()
    finally:
        broker.close()
