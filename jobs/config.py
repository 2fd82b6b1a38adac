"""Settings of a run: ``conf/defaults.yaml`` (or ``--config``), a broker's ``server.properties``, a
``--topic-config`` file and the command line, merged with one precedence rule.

Precedence, highest first: command line > ``--topic-config`` (per topic) > the cluster's metadata (the topic's
config, this broker's and the cluster-wide dynamic defaults; :func:`indexlib.cli.load_cluster_settings`) >
``--server-properties`` > config file > Kafka's defaults. Every file is validated; a problem raises :class:`ConfigError` naming
the file, the key and what is wrong.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from indexlib.cli import (
    ClusterSettings,
    SettingsFileError,
    TopicSettings,
    load_cluster_settings,
    metadata_log_dir,
    read_mapping,
    read_server_properties,
    read_topic_config,
    store_spec,
)
from indexlib.recovery import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    IndexSettings,
    SettingError,
    check_index_setting,
)
from indexlib.storage import LOCAL, ClusterMetadataError, StoreSpec, remote_store


def conf_dir() -> Path:
    """The project's ``conf/``: beside the source tree, else installed with the wheel under ``<prefix>/share``."""
    source = Path(__file__).resolve().parent.parent / "conf"
    if source.is_dir():
        return source
    return Path(sys.prefix) / "share" / "kafka-index-rebuild" / "conf"


DEFAULTS_FILE = conf_dir() / "defaults.yaml"

KAFKA_DEFAULTS = {
    "index_interval_bytes": DEFAULT_INDEX_INTERVAL_BYTES,
    "segment_index_bytes": DEFAULT_SEGMENT_INDEX_BYTES,
    "audit_table": "kafka-index-audit",
    "audit_journal": "kafka-index-audit-journal",
    "audit_storage_options": {},
    "backup_dir": None,
    "bytes_per_task": 256 << 20,
    "spark": {"master": "local[*]", "app_name": "kafka-index-rebuild", "conf": {}},
}
_SPARK_KEYS = {"master": str, "app_name": str, "conf": dict}


class ConfigError(ValueError):
    """A configuration file or value that cannot be used; the message names the file and key."""


@dataclass
class Settings:
    """Everything a run needs, resolved. ``for_topic`` applies the per-topic layer."""

    log_dirs: list[str]
    defaults: IndexSettings
    topic_overrides: dict[str, dict[str, int]] = field(default_factory=dict)
    cli_overrides: dict[str, int] = field(default_factory=dict)
    audit_table: str | None = None
    audit_journal: str = "kafka-index-audit-journal"  # where the audit rows wait until the table has them
    audit_storage_options: dict[str, str] = field(default_factory=dict)  # delta-rs's, for an s3:// table
    backup_dir: str | None = None
    bytes_per_task: int = 256 << 20
    spark_master: str = "local[*]"
    spark_app_name: str = "kafka-index-rebuild"
    spark_conf: dict[str, str] = field(default_factory=dict)
    cluster: ClusterSettings | None = None  # the cluster's metadata, when read
    store: StoreSpec = LOCAL  # where the log dirs are: the local file system, or a bucket
    defaults_from: dict[str, str] = field(default_factory=dict)  # the layer each of ``defaults`` came from
    topic_config: str | None = None

    def topic_settings(self) -> TopicSettings:
        """The index settings' layers, as both command lines hold them."""
        return TopicSettings(
            self.defaults,
            self.topic_overrides,
            self.cli_overrides,
            self.cluster,
            self.defaults_from,
            f"--topic-config {self.topic_config}",
        )

    def for_topic(self, topic: str) -> IndexSettings:
        return self.topic_settings().for_topic(topic)


def _check_int(source: str, key: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{source}: {key} must be an integer, got {value!r}")
    if value < minimum:
        raise ConfigError(f"{source}: {key} must be >= {minimum}, got {value}")
    return value


def _index_setting(source: str, name: str, value: object) -> int:
    """:func:`indexlib.recovery.settings.check_index_setting` (Kafka's bounds), as a ConfigError."""
    try:
        return check_index_setting(source, name, value)
    except SettingError as exc:
        raise ConfigError(str(exc)) from None


def _load_mapping(path: str | os.PathLike[str], what: str) -> dict[Any, Any]:
    """A JSON or YAML file holding a mapping (:func:`indexlib.cli.read_mapping`), as a ConfigError."""
    with _as_config_error():
        return read_mapping(path, what)


@contextlib.contextmanager
def _as_config_error() -> Iterator[None]:
    """indexlib's :class:`SettingsFileError` (the same one line) as this module's ConfigError."""
    try:
        yield
    except (SettingsFileError, ClusterMetadataError) as exc:
        raise ConfigError(str(exc)) from None


def load_config_file(path: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The config file (default ``conf/defaults.yaml``) merged over Kafka's defaults, validated."""
    merged: dict[str, Any] = json.loads(json.dumps(KAFKA_DEFAULTS))
    source = str(path or DEFAULTS_FILE)
    if path is None and not DEFAULTS_FILE.exists():
        return merged
    data = _load_mapping(source, "config file")
    for key, value in data.items():
        if key not in merged:
            raise ConfigError(f"{source}: unknown key {key!r} (known: {', '.join(sorted(merged))})")
        if key in ("index_interval_bytes", "segment_index_bytes"):
            merged[key] = _index_setting(source, key, value)
        elif key == "bytes_per_task":
            merged[key] = _check_int(source, key, value, 1)
        elif key in ("audit_table", "backup_dir"):
            if value is not None and not isinstance(value, str):
                raise ConfigError(f"{source}: {key} must be a string or null, got {value!r}")
            merged[key] = value
        elif key == "audit_storage_options":
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: audit_storage_options must be a mapping of delta-rs storage options")
            merged[key] = {str(k): str(v) for k, v in value.items()}
        elif key == "audit_journal":
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{source}: audit_journal must be a directory path, got {value!r}")
            merged[key] = value
        elif key == "spark":
            if not isinstance(value, dict):
                raise ConfigError(f"{source}: spark must be a mapping, got {value!r}")
            for sub, sub_value in value.items():
                if sub not in _SPARK_KEYS:
                    raise ConfigError(f"{source}: unknown key spark.{sub} (known: {', '.join(sorted(_SPARK_KEYS))})")
                if not isinstance(sub_value, _SPARK_KEYS[sub]):
                    raise ConfigError(f"{source}: spark.{sub} must be a {_SPARK_KEYS[sub].__name__}, got {sub_value!r}")
                merged["spark"][sub] = sub_value
            merged["spark"]["conf"] = {str(k): str(v) for k, v in merged["spark"]["conf"].items()}
    return merged


def load_server_properties(path: str | os.PathLike[str]) -> tuple[list[str], dict[str, int]]:
    """``log.dirs`` and the index settings of a broker's ``server.properties`` (:func:`indexlib.cli.read_server_properties`)."""
    with _as_config_error():
        return read_server_properties(path)


def load_topic_config(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """Topic -> index settings of a JSON or YAML topic config file (:func:`indexlib.cli.read_topic_config`)."""
    with _as_config_error():
        return read_topic_config(path)


def _in_state_dir(path: str | None) -> str | None:
    """A config file's path as the run uses it: a relative one lies under the state dir
    (:func:`indexlib.engine.state_dir`), never in the working directory (which may be a broker's log dir); an
    absolute path, a URI and ``none`` as written. The command line's paths are the user's, relative to where
    they run it."""
    from indexlib.engine import state_dir

    if path is None or "://" in path or os.path.isabs(path) or path.strip().lower() == "none":
        return path
    return os.path.join(state_dir(), os.path.expanduser(path))


def parse_storage_options(pairs: list[str] | None) -> dict[str, str]:
    """``--audit-storage-option KEY=VALUE`` (repeatable) as a mapping; ConfigError for one without ``=``."""
    from indexlib.cli import key_values

    try:
        return key_values(pairs, "--audit-storage-option")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def resolve_settings(
    *,
    config_file: str | None = None,
    server_properties: str | None = None,
    topic_config: str | None = None,
    log_dirs: list[str] | None = None,
    index_interval_bytes: int | None = None,
    segment_index_bytes: int | None = None,
    audit_table: str | None = None,
    audit_journal: str | None = None,
    backup_dir: str | None = None,
    audit_storage_options: list[str] | None = None,
    cluster_metadata: str | None = None,
    storage_options: list[str] | None = None,
    output_dir: str | None = None,
) -> Settings:
    """Merge every layer (see the module docstring). ``audit_table="none"`` disables auditing;
    ``cluster_metadata``: ``--cluster-metadata`` (default: found in the log dirs or ``metadata.log.dir``);
    ``storage_options``: ``--storage-option KEY=VALUE`` of log dirs (or ``output_dir``) in object storage."""
    conf = load_config_file(config_file)
    base = {"index_interval_bytes": conf["index_interval_bytes"], "segment_index_bytes": conf["segment_index_bytes"]}
    kafka = {"index_interval_bytes": DEFAULT_INDEX_INTERVAL_BYTES, "segment_index_bytes": DEFAULT_SEGMENT_INDEX_BYTES}
    defaults_from = {n: f"{config_file or DEFAULTS_FILE}" for n, v in base.items() if v != kafka[n]}
    dirs: list[str] = []
    metadata_dir = None
    if server_properties is not None:
        broker_dirs, broker_settings = load_server_properties(server_properties)
        base.update(broker_settings)
        defaults_from.update({n: f"--server-properties {server_properties}" for n in broker_settings})
        dirs = broker_dirs
        with _as_config_error():
            metadata_dir = metadata_log_dir(server_properties)
    if log_dirs:
        dirs = list(log_dirs)
    store = store_spec(dirs, storage_options, output_dir)  # the local file system, or the one bucket of the log dirs
    with _as_config_error():
        cluster = load_cluster_settings(dirs, cluster_metadata, metadata_dir, remote_store(store)) if dirs else None
    cli = {}
    for name, value in (("index_interval_bytes", index_interval_bytes), ("segment_index_bytes", segment_index_bytes)):
        if value is not None:
            cli[name] = _index_setting(f"command line --{name.replace('_', '-')}", name, value)
    table = audit_table if audit_table is not None else _in_state_dir(conf["audit_table"])
    if table is not None and table.strip().lower() == "none":
        table = None
    return Settings(
        log_dirs=dirs,
        defaults=IndexSettings(**base),
        topic_overrides=load_topic_config(topic_config) if topic_config else {},
        cli_overrides=cli,
        audit_table=table,
        audit_journal=audit_journal if audit_journal is not None else str(_in_state_dir(conf["audit_journal"])),
        audit_storage_options={**conf["audit_storage_options"], **parse_storage_options(audit_storage_options)},
        backup_dir=backup_dir if backup_dir is not None else _in_state_dir(conf["backup_dir"]),
        bytes_per_task=conf["bytes_per_task"],
        spark_master=conf["spark"]["master"],
        spark_app_name=conf["spark"]["app_name"],
        spark_conf=dict(conf["spark"]["conf"]),
        cluster=cluster,
        store=store,
        defaults_from=defaults_from,
        topic_config=topic_config,
    )
