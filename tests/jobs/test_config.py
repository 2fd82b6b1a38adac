"""Settings layers and their validation (no Spark)."""

from __future__ import annotations

import pytest

from jobs.config import DEFAULTS_FILE, ConfigError, load_config_file, parse_storage_options, resolve_settings


def test_shipped_defaults_are_kafkas():
    conf = load_config_file()
    assert DEFAULTS_FILE.exists()
    assert (conf["index_interval_bytes"], conf["segment_index_bytes"]) == (4096, 10485760)
    assert conf["spark"]["master"] == "local[*]"


def test_precedence_command_line_topic_config_server_properties_config(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("index_interval_bytes: 1000\nsegment_index_bytes: 2000\n")
    props = tmp_path / "server.properties"
    props.write_text("# broker\nlog.dirs=/a,/b\nlog.index.interval.bytes=3000\nbroker.id=1\n")
    topics = tmp_path / "t.json"
    topics.write_text('{"orders": {"index.interval.bytes": 512, "cleanup.policy": "compact"}}')
    s = resolve_settings(config_file=str(config), server_properties=str(props), topic_config=str(topics))
    assert s.log_dirs == ["/a", "/b"]
    assert (s.for_topic("orders").index_interval_bytes, s.for_topic("orders").segment_index_bytes) == (512, 2000)
    assert (s.for_topic("other").index_interval_bytes, s.for_topic("other").segment_index_bytes) == (3000, 2000)
    s = resolve_settings(
        config_file=str(config),
        server_properties=str(props),
        topic_config=str(topics),
        index_interval_bytes=7,
        log_dirs=["/c"],
    )
    assert s.for_topic("orders").index_interval_bytes == 7 and s.log_dirs == ["/c"]
    assert resolve_settings(audit_table="none").audit_table is None


@pytest.mark.parametrize(
    "text, message",
    [
        ("index_interval_bytes: -1\n", "index.interval.bytes must be between 0 and 2147483647, got -1"),
        ("index_interval_bytes: ten\n", "must be an integer"),
        ("segment_index_bytes: 4\n", "segment.index.bytes must be between 12 and 2147483647, got 4"),
        ("segment_index_bytes: 3000000000\n", "segment.index.bytes must be between 12 and 2147483647"),
        ("index_interval_bytes: 9223372036854775808\n", "index.interval.bytes must be between 0 and 2147483647"),
        ("colour: blue\n", "unknown key 'colour'"),
        ("spark:\n  mastr: local\n", "unknown key spark.mastr"),
        ("[1, 2]\n", "must be a mapping"),
        ("a: [\n", "malformed config file"),
        ("bytes_per_task: true\n", "bytes_per_task must be an integer, got True"),
        ("audit_table: 5\n", "audit_table must be a string or null, got 5"),
        ("audit_storage_options: [a]\n", "audit_storage_options must be a mapping"),
        ("audit_journal: ''\n", "audit_journal must be a directory path, got ''"),
        ("spark: local\n", "spark must be a mapping, got 'local'"),
        ("spark:\n  master: 5\n", "spark.master must be a str, got 5"),
    ],
)
def test_config_errors_name_the_file_and_key(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message) as info:
        load_config_file(str(path))
    assert str(path) in str(info.value)


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config_file(str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="is a directory"):
        resolve_settings(topic_config=str(tmp_path))
    bad = tmp_path / "server.properties"
    bad.write_text("log.index.interval.bytes=abc\n")
    with pytest.raises(ConfigError, match="log.index.interval.bytes must be an integer"):
        resolve_settings(server_properties=str(bad))


def test_server_properties_are_read_as_java_reads_them(tmp_path):
    """Continuation lines and the ``key value`` / ``key:value`` separators are valid Java properties."""
    props = tmp_path / "server.properties"
    props.write_text(
        "# a broker\n! also a comment\nlog.dirs=/data/a,\\\n    /data/b\n"
        "log.index.interval.bytes 2048\nlog.index.size.max.bytes:4096\nbroker.id = 1\n"
    )
    s = resolve_settings(server_properties=str(props))
    assert s.log_dirs == ["/data/a", "/data/b"]
    assert (s.defaults.index_interval_bytes, s.defaults.segment_index_bytes) == (2048, 4096)
    props.write_text("log.index.size.max.bytes=9223372036854775808\n")
    with pytest.raises(ConfigError, match=r"log.index.size.max.bytes: segment.index.bytes must be between 12 and"):
        resolve_settings(server_properties=str(props))


@pytest.mark.parametrize("pair", ["region", "=eu-west-1", " =x"])
def test_a_storage_option_needs_a_key_and_a_value(pair):
    with pytest.raises(ConfigError, match=r"--audit-storage-option: expected KEY=VALUE"):
        parse_storage_options([pair])
    assert parse_storage_options(["region=eu=1", "AWS_ALLOW_HTTP=true"]) == {"region": "eu=1", "AWS_ALLOW_HTTP": "true"}
