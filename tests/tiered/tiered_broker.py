"""A real Kafka 4.1.0 broker that tiers segments (KIP-405) through the project's own test RSM (``TestRsm.java``,
compiled here with ``javac`` against the distribution's jars), with Kafka's default topic-based metadata manager.

:func:`tier` formats a broker, writes topics with ``remote.storage.enable=true`` and 1 MiB segments (plain,
zstd-compressed idempotent, and transactional with every third transaction aborted), waits until every closed
segment is copied, keeps a copy of the log dir as it was then (``before_local_delete``), lets the broker delete
its local copies (``local.retention.ms=1000``) and stops it by its PID. What it leaves: the broker's log dir
(``__remote_log_metadata-N`` among its partitions) and the remote objects in a dir or a bucket.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..broker.kafka_broker import KAFKA_HOME, KafkaBroker, copy_log_dir, fill, kafka_home_missing

RSM_SOURCE = Path(__file__).with_name("TestRsm.java")
RSM_CLASS = "kafkaindex.tiered.TestRsm"
RSM_JARS = (
    "kafka-storage-api", "kafka-clients", "kafka-server-common", "jackson-databind", "jackson-core",
    "jackson-annotations", "zstd-jni",
)  # fmt: skip
#: topic -> (compression, producer) of :func:`tier`; two partitions each
TIERED_TOPICS: dict[str, tuple[str | None, str]] = {
    "plain": (None, "plain"),
    "zstd": ("zstd", "idempotent"),
    "txn": (None, "transactional"),
}
TOPIC_CONFIGS = {"remote.storage.enable": "true", "segment.bytes": str(1 << 20), "local.retention.ms": "-2"}
# "Copied 00000000000000001024.log to remote storage with segment-id: RemoteLogSegmentId{...}"
COPIED = re.compile(r"Copied (\d{20})\.log to remote storage with segment-id")


def rsm_missing(home: Path = KAFKA_HOME) -> str | None:
    """Why no tiering broker can run here (None when one can)."""
    if why := kafka_home_missing(home):
        return why
    if shutil.which("javac") is None or shutil.which("jar") is None:
        return "no javac/jar on PATH to compile the test RemoteStorageManager"
    return None


def compile_rsm(work: Path, home: Path = KAFKA_HOME) -> Path:
    """``TestRsm.java`` compiled against the distribution's jars, as ``work/test-rsm.jar``."""
    libs = home / "libs"
    classpath = [str(jar) for name in RSM_JARS for jar in sorted(libs.glob(f"{name}-[0-9]*.jar"))]
    classes = work / "rsm-classes"
    subprocess.run(
        ["javac", "-nowarn", "-d", str(classes), "-cp", ":".join(classpath), str(RSM_SOURCE)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    jar = work / "test-rsm.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True)
    return jar


@dataclass
class TieredRun:
    """What :func:`tier` left: the stopped broker's log dir, its copy from before the local deletes, where the RSM
    wrote (a dir, or ``bucket``/``prefix`` on the S3 endpoint) and the segments it copied per partition."""

    layout: str
    log_dir: Path
    before_local_delete: Path
    remote_dir: Path | None
    bucket: str | None
    prefix: str
    copied: dict[str, list[int]] = field(default_factory=dict)  # "topic-partition" -> base offsets copied
    broker: KafkaBroker | None = None  # stopped; ``start()`` runs it again on the same log dir and RSM

    # Note: the broker rolls a partition's active segment once local retention deletes everything before it, so
    # the last segment of ``before_local_delete`` (active then) is copied too, after its roll.

    @property
    def remote_uri(self) -> str:
        """Where the layout's objects start (what ``--remote`` takes)."""
        if self.bucket is not None:
            return f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        assert self.remote_dir is not None
        return str(self.remote_dir / self.prefix) if self.prefix else str(self.remote_dir)


def rsm_overrides(jar: Path, layout: str, remote_dir: Path | None, s3: tuple[str, str] | None, prefix: str) -> dict:
    """The broker settings that tier through the test RSM (fast enough for a test: a task every second)."""
    out = {
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": RSM_CLASS,
        "remote.log.storage.manager.class.path": str(jar),
        "rsm.config.layout": layout,
        "rsm.config.prefix": prefix,
        "remote.log.metadata.manager.listener.name": "PLAINTEXT",
        "rlmm.config.remote.log.metadata.topic.replication.factor": "1",
        "rlmm.config.remote.log.metadata.topic.num.partitions": "5",
        "remote.log.manager.task.interval.ms": "1000",
        "remote.log.manager.thread.pool.size": "1",
        "remote.log.manager.copier.thread.pool.size": "1",
        "remote.log.manager.expiration.thread.pool.size": "1",
        "remote.log.reader.threads": "2",
        "log.retention.check.interval.ms": "1000",
    }
    if layout == "aiven":
        out.update({"rsm.config.chunk.size": str(256 << 10), "rsm.config.compression": "true"})
        out["rsm.config.custom.metadata"] = "true"
    if s3 is not None:
        out.update({"rsm.config.s3.endpoint": s3[0], "rsm.config.s3.bucket": s3[1]})
    else:
        assert remote_dir is not None
        out["rsm.config.dir"] = str(remote_dir)
    return out


def local_segments(log_dir: Path, partition: str) -> list[int]:
    return sorted(int(p.stem) for p in (log_dir / partition).glob("*.log"))


def tier(
    work: Path, layout: str, jar: Path, s3: tuple[str, str] | None = None, prefix: str = "",
    records_per_partition: int = 4000, timeout: float = 120.0,
) -> TieredRun:  # fmt: skip
    """Run a broker that tiers :data:`TIERED_TOPICS` through the test RSM in ``layout`` (to ``work/remote``, or
    to ``s3`` = (endpoint, bucket) under ``prefix``); see the module docstring."""
    remote_dir = None if s3 else work / "remote"
    log_dir = work / "data"
    broker = KafkaBroker(work / "broker", log_dir, overrides=rsm_overrides(jar, layout, remote_dir, s3, prefix))
    try:
        broker.format()
        broker.start()
        topics = fill(
            broker.bootstrap, records_per_partition, value_bytes=1000, topics=TIERED_TOPICS, configs=TOPIC_CONFIGS
        )
        partitions = [f"{t}-{p}" for t, n in topics.items() for p in range(n)]
        closed = {tp: local_segments(log_dir, tp)[:-1] for tp in partitions}
        _wait(broker, lambda: _copied(broker, closed), "every closed segment copied", timeout)
        before = copy_log_dir(log_dir, work / "before-local-delete")
        _alter_topics(broker.bootstrap, list(topics), {**TOPIC_CONFIGS, "local.retention.ms": "1000"})
        _wait(
            broker, lambda: all(local_segments(log_dir, tp) == local_segments(log_dir, tp)[-1:] for tp in partitions),
            "the local copies of tiered segments deleted", timeout,
        )  # fmt: skip
        copied = _copied(broker, {})
        broker.stop()
        return TieredRun(layout, log_dir, before, remote_dir, s3[1] if s3 else None, prefix, copied or {}, broker)
    finally:
        broker.close()


def _copied(broker: KafkaBroker, closed: dict[str, list[int]]) -> dict[str, list[int]] | None:
    """Partition -> the bases copied, once the server.log says every closed segment of ``closed`` was."""
    text = broker.server_log()
    out: dict[str, list[int]] = {}
    for line in text.splitlines():
        if m := COPIED.search(line):
            tp = re.search(r"topicIdPartition=[^:]+:([^}\s,]+)", line)
            if tp:
                out.setdefault(tp.group(1), []).append(int(m.group(1)))
    done = all(set(bases) <= set(out.get(tp, ())) for tp, bases in closed.items())
    return {tp: sorted(bases) for tp, bases in out.items()} if done else None


def _wait(broker: KafkaBroker, check, what: str, timeout: float):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if result := check():
            return result
        if broker.proc is not None and broker.proc.poll() is not None:
            raise AssertionError(f"the broker exited while waiting for {what}:\n{broker.tail()}")
        time.sleep(0.2)
    raise AssertionError(f"not {what} within {timeout:.0f} s:\n{broker.tail()}")


def _alter_topics(bootstrap: str, topics: list[str], configs: dict[str, str]) -> None:
    """Set ``configs`` as each topic's whole set of overrides (AlterConfigs replaces them all)."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
    try:
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, t, configs=configs) for t in topics])
    finally:
        admin.close()


# ConsumerTask, once the metadata of every tiered partition is loaded: "Initialized for all the 6 assigned
# user-partitions mapped to the 3 meta-partitions in 131 ms"
RLMM_READY = re.compile(r"Initialized for all the \d+ assigned user-partitions")


def start_tiered(broker: KafkaBroker, timeout: float = 120.0) -> None:
    """Start a tiering broker and wait until its remote log metadata manager has loaded the metadata of every
    tiered partition (until then a remote fetch fails with an unknown error)."""
    broker.start()
    _wait(broker, lambda: RLMM_READY.search(broker.server_log()), "the remote log metadata loaded", timeout)
