"""Broker identity: a log dir's meta.properties parsed as Kafka reads it (ZooKeeper-era and KRaft, real brokers'
files), carried by every segment, finding and JSON record of both command lines' runs; a log dir without one is
a finding, and ``--broker-id`` names its broker (refused when a meta.properties names another)."""

from __future__ import annotations

import json
import pathlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from indexlib.cli.main import main
from indexlib.format import BrokerIdentity, MetaPropertiesError, parse_meta_properties
from indexlib.storage import read_log_dir_meta
from indexlib.testing.generate import generate_partition

from ..conftest import KAFKA_REAL, requires_kafka_real

KRAFT = """#
#Sun Sep 07 05:16:20 UTC 2025
node.id=3
directory.id=XE2M0goTkGhQgA2Kte9nsA
version=1
cluster.id=MkU3OEVBNTcwNTJENDM2Qk
"""
ZOOKEEPER = "#\n#Sun Dec 28 00:39:30 UTC 2025\nbroker.id=1\nversion=0\ncluster.id=5M5OrFsWQSCsuW1hx-JgZQ\n"


def test_kraft_and_zookeeper_meta_properties():
    assert parse_meta_properties(KRAFT, "m") == BrokerIdentity("MkU3OEVBNTcwNTJENDM2Qk", 3, "XE2M0goTkGhQgA2Kte9nsA")
    assert parse_meta_properties(ZOOKEEPER, "m") == BrokerIdentity("5M5OrFsWQSCsuW1hx-JgZQ", 1, None)
    # Java's properties syntax: ':' and ' ' separators, escapes, continuation lines, '!' comments
    text = "! a comment\nversion : 1\nnode.id 12\ncluster.id=ab\\:c\\\n   d\ndirectory.id=\\u0041B\n"
    assert parse_meta_properties(text, "m") == BrokerIdentity("ab:cd", 12, "AB")
    assert parse_meta_properties("version=0\nbroker.id=4\n", "m") == BrokerIdentity(None, 4, None)


@pytest.mark.parametrize(
    "text, message",
    [
        ("broker.id=1\n", "m: no version (not a Kafka meta.properties)"),
        ("version=2\nnode.id=1\ncluster.id=c\n", "m: unknown version '2' (Kafka knows 0 and 1)"),
        ("version=0\ncluster.id=c\n", "m: version 0 (ZooKeeper-era) but no broker.id"),
        ("version=1\nnode.id=1\n", "m: version 1 (KRaft) but no cluster.id"),
        ("version=1\ncluster.id=c\n", "m: version 1 (KRaft) but no node.id"),
        ("version=0\nbroker.id=one\n", "m: broker.id must be an integer, got 'one'"),
        ("version=0\nbroker.id=99999999999\n", "m: broker.id 99999999999 is outside Java's int"),
        ("\x00\x01garbage", "m: no version (not a Kafka meta.properties)"),
    ],
)
def test_what_kafka_would_refuse(text, message):
    with pytest.raises(MetaPropertiesError) as caught:
        parse_meta_properties(text, "m")
    assert str(caught.value) == message


@requires_kafka_real
def test_every_real_brokers_meta_properties_names_its_broker():
    files = sorted(KAFKA_REAL.rglob("meta.properties"))
    assert files
    for path in files:
        meta = read_log_dir_meta(str(path.parent))
        assert meta.problem is None, (path, meta.detail)
        text = path.read_text()
        assert meta.identity.broker_id is not None, path
        assert (meta.identity.cluster_id is not None) == ("cluster.id" in text), path  # ZooKeeper-era: optional
        assert (meta.identity.directory_id is not None) == ("directory.id" in text), path
        assert "version=1" in text or meta.identity.directory_id is None


def test_read_log_dir_meta_missing_unreadable_and_malformed(tmp_path):
    assert read_log_dir_meta(str(tmp_path)).problem == "missing"
    (tmp_path / "meta.properties").write_text("version=1\nnode.id=x\ncluster.id=c\n")
    meta = read_log_dir_meta(str(tmp_path))
    assert (meta.problem, meta.detail) == ("malformed", "node.id must be an integer, got 'x'")
    (tmp_path / "meta.properties").unlink()
    (tmp_path / "meta.properties").mkdir()
    meta = read_log_dir_meta(str(tmp_path))
    assert meta.problem == "malformed" and meta.detail.startswith("cannot read it: ")


# ------------------------------------------------------------------------------------- the command line
@pytest.fixture
def log_dir(tmp_path) -> pathlib.Path:
    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=2, batches_per_segment=20, seed=3)
    generate_partition(logs / "orders-1", segments=1, batches_per_segment=20, seed=4)
    assert main(["rebuild", str(logs)]) == 0
    return logs


def verify_json(capsys, *argv: object) -> tuple[int, dict, str]:
    capsys.readouterr()
    code = main(["verify", *map(str, argv), "--json", "-"])
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def test_every_segment_and_finding_carries_the_identity(capsys, log_dir):
    (log_dir / "meta.properties").write_text(KRAFT)
    (log_dir / "orders-0" / "00000000000000000000.index").unlink()
    code, report, err = verify_json(capsys, log_dir)
    assert code == 1
    identity = {"cluster_id": "MkU3OEVBNTcwNTJENDM2Qk", "broker_id": 3, "directory_id": "XE2M0goTkGhQgA2Kte9nsA"}
    assert report["brokers"] == [{"log_dir": str(log_dir), **identity}]
    assert len(report["segments"]) == 3
    for segment in report["segments"]:
        assert {k: segment[k] for k in identity} == identity
        for finding in segment["findings"]:
            assert {k: finding[k] for k in identity} == identity
    [missing] = report["remaining_findings"]
    assert missing["kind"] == "index_missing" and {k: missing[k] for k in identity} == identity
    assert f"log dir {log_dir}: broker 3 of cluster MkU3OEVBNTcwNTJENDM2Qk (directory id XE2M0goTkGhQgA2Kte9nsA)" in err


def test_a_log_dir_without_meta_properties_is_a_finding_and_broker_id_names_it(capsys, log_dir):
    code, report, err = verify_json(capsys, log_dir)
    assert code == 0  # info: the data is verified all the same
    [finding] = report["partition_findings"][str(log_dir)]
    assert finding["kind"] == "no_meta_properties" and finding["severity"] == "info"
    assert finding["file"] == str(log_dir / "meta.properties") and "give --broker-id" in finding["detail"]
    assert all(s["broker_id"] is None and s["cluster_id"] is None for s in report["segments"])
    assert f"log dir {log_dir}: unknown broker" in err
    code, report, err = verify_json(capsys, log_dir, "--broker-id", 5)
    assert code == 0
    assert report["brokers"] == [{"log_dir": str(log_dir), "cluster_id": None, "broker_id": 5, "directory_id": None}]
    assert all(s["broker_id"] == 5 for s in report["segments"])
    assert "named broker 5 by --broker-id" in report["partition_findings"][str(log_dir)][0]["detail"]


def test_broker_id_that_meta_properties_contradicts_is_refused(capsys, log_dir):
    (log_dir / "meta.properties").write_text(ZOOKEEPER)
    capsys.readouterr()
    code = main(["verify", str(log_dir), "--broker-id", "2"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines() == [
        f"python -m indexlib: error: {log_dir / 'meta.properties'} names broker 1, not --broker-id 2: --broker-id "
        "names the broker of a log dir without meta.properties; this run reads another broker's log dir (drop "
        "--broker-id, or give that broker's log dirs)"
    ]
    assert main(["verify", str(log_dir), "--broker-id", "1"]) == 0  # the same broker: fine
    assert main(["verify", str(log_dir), "--broker-id", "-1"]) == 2
    assert "a broker id is 0 to 2147483647" in capsys.readouterr().err


def test_a_malformed_meta_properties_is_an_error_finding(capsys, log_dir):
    (log_dir / "meta.properties").write_text("version=7\n")
    code, report, _ = verify_json(capsys, log_dir / "orders-1")  # a partition dir: its log dir is read too
    assert code == 1
    [finding] = report["remaining_findings"]
    assert finding["kind"] == "bad_meta_properties" and "unknown version '7'" in finding["detail"]
    assert finding["broker_id"] is None


def test_several_brokers_in_one_run_get_a_broker_column(capsys, tmp_path):
    for broker in (1, 2):
        logs = tmp_path / f"b{broker}"
        generate_partition(logs / f"t{broker}-0", segments=1, batches_per_segment=10, seed=broker)
        assert main(["rebuild", str(logs)]) == 0
        (logs / "meta.properties").write_text(f"version=1\nnode.id={broker}\ncluster.id=C\n")
    (tmp_path / "b2" / "t2-0" / "00000000000000000000.timeindex").unlink()
    assert main(["verify", str(tmp_path / "b1"), str(tmp_path / "b2")]) == 1
    out = capsys.readouterr().out
    assert any(line.split()[:2] == ["broker", "kind"] for line in out.splitlines())
    assert any(line.split()[:2] == ["2", "timeindex_missing"] for line in out.splitlines())
    assert any(line.split()[:2] == ["broker", "partition"] for line in out.splitlines())
    assert any(line.split()[:2] == ["1", "t1-0"] for line in out.splitlines())


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=" \t\f=:#!\r\nab.c1", max_size=60))
def test_a_properties_text_without_a_backslash_reads_as_javaproperties_reads_it(text):
    """The backslash-free reading (no ``javaproperties`` import at start) follows Java's ``Properties.load``."""
    import javaproperties

    from indexlib.format.meta_properties import parse_properties

    assert parse_properties(text) == javaproperties.loads(text)
    assert parse_properties(text + "\n\\u0041=1\n")["A"] == "1"  # with a backslash: javaproperties itself


def test_a_run_reading_meta_properties_does_not_import_javaproperties(tmp_path):
    """Every ``meta.properties`` a broker writes has no backslash: read without the ~40 ms import."""
    import subprocess
    import sys

    logs = tmp_path / "logs"
    generate_partition(logs / "orders-0", segments=1, batches_per_segment=3, seed=3)
    (logs / "meta.properties").write_text("#\n#Thu Nov 26\nnode.id=4\nversion=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n")
    code = (
        "import sys; from indexlib.cli.main import main; from indexlib.storage import read_log_dir_meta;"
        "main(['verify', sys.argv[1], '-q']); print(read_log_dir_meta(sys.argv[1]).identity.broker_id,"
        "'javaproperties' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(logs)], capture_output=True, text=True, check=True).stdout
    assert out.split()[-2:] == ["4", "False"]
