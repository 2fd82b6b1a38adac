"""``dump --offsets-decoder`` against ``kafka-dump-log.sh`` on the ``__consumer_offsets`` a real Kafka 4.1.0 broker
writes for the groups of today: a KIP-848 consumer group (``group.protocol=consumer``: the group, member, target
assignment and current assignment records, types 3 and 5..8), a classic consumer joining it (its tagged
``classicMemberMetadata``), a classic group (its members' subscriptions and assignments decoded), and a share
group (KIP-932, types 10..15). The real fixtures hold none of the new records."""

from __future__ import annotations

import subprocess
import time

import pytest

from .kafka_broker import KafkaBroker, kafka_home_missing, partition_dirs
from .kafka_dump_log import assert_same_lines, kafka_dump_log

pytestmark = pytest.mark.skipif(kafka_home_missing() is not None, reason=kafka_home_missing() or "")


def tool(broker: KafkaBroker, name: str, *args: str, timeout: float = 120, stdin: str | None = None) -> str:
    proc = subprocess.run(
        [str(broker.home / "bin" / name), "--bootstrap-server", broker.bootstrap, *args],
        input=stdin, capture_output=True, text=True, timeout=timeout, env=broker.env(broker.work / "tool-logs"),
    )  # fmt: skip
    assert proc.returncode == 0, f"{name} {args}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
    return proc.stdout


def consume(
    broker: KafkaBroker, group: str, *properties: str, share: bool = False, records: int = 5, idle_ms: int = 60000
) -> subprocess.Popen:
    """A console consumer of ``orders`` in ``group`` that exits after ``records`` records or ``idle_ms`` without
    one."""
    name = "kafka-console-share-consumer.sh" if share else "kafka-console-consumer.sh"
    args = ["--topic", "orders", "--group", group, "--max-messages", str(records), "--timeout-ms", str(idle_ms)]
    if not share:
        args.append("--from-beginning")
    for p in properties:
        args += ["--consumer-property", p]
    return subprocess.Popen(
        [str(broker.home / "bin" / name), "--bootstrap-server", broker.bootstrap, *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=broker.env(broker.work / "tool-logs"),
    )  # fmt: skip


def test_the_groups_of_kafka_4_decode_as_kafka_decodes_them(tmp_path):
    logs = tmp_path / "logs"
    broker = KafkaBroker(tmp_path / "broker", logs, overrides={"offsets.topic.num.partitions": "1"})
    (broker.work / "tool-logs").mkdir()
    broker.format()
    try:
        broker.start()
        tool(broker, "kafka-features.sh", "upgrade", "--feature", "share.version=1")
        tool(broker, "kafka-topics.sh", "--create", "--topic", "orders", "--partitions", "2")
        earliest = (
            "--entity-type",
            "groups",
            "--entity-name",
            "share-group",
            "--add-config",
            "share.auto.offset.reset=earliest",
        )
        tool(broker, "kafka-configs.sh", "--alter", *earliest)  # it reads every record, whenever it joins
        share = consume(broker, "share-group", share=True)
        new = consume(broker, "kip848", "group.protocol=consumer", records=100, idle_ms=20000)
        time.sleep(8)  # the classic member joins the consumer group while its KIP-848 member is in it
        joined = consume(broker, "kip848", "group.protocol=classic", records=100, idle_ms=20000)
        time.sleep(8)
        tool(broker, "kafka-console-producer.sh", "--topic", "orders", stdin="".join(f"r{i}\n" for i in range(40)))
        classic = consume(broker, "classic-group")
        read = {}
        for name, proc in (("share", share), ("new", new), ("joined", joined), ("classic", classic)):
            out, err = proc.communicate(timeout=180)
            read[name] = out.split()
            assert proc.returncode == 0 or name in ("new", "joined"), err[-2000:]  # those two end by idling
        assert len(read["share"]) == len(read["classic"]) == 5
        assert sorted(read["new"] + read["joined"]) == sorted(f"r{i}" for i in range(40)), read
        broker.stop()
    finally:
        broker.close()
    offsets = [p for p in partition_dirs(logs) if p.name.startswith("__consumer_offsets-")]
    files = sorted(f for p in offsets for f in p.glob("*.log"))
    lines = kafka_dump_log(files, "--offsets-decoder")
    types = {line.split('key: {"type":"')[1].split('"')[0] for line in lines if 'key: {"type":"' in line}
    assert {"1", "2", "3", "5", "6", "7", "8", "10", "11", "12", "13", "14"} <= types, types
    assert any('"classicMemberMetadata":{' in line for line in lines)
    assert any('"subscription":{"topics":["orders"]' in line for line in lines)
    assert_same_lines(files, "--offsets-decoder")
