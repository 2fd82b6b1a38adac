"""The sources a run's index settings come from, read the same way by both command lines: a broker's
``server.properties`` (``log.dirs``, ``metadata.log.dir`` and the broker-wide index settings), the cluster's own
metadata (KRaft's ``__cluster_metadata``: each topic's configs and the dynamic broker defaults) and a topic config
file (topic -> Kafka topic configs, JSON or YAML). Every value is checked with
:func:`indexlib.recovery.check_index_setting`; every problem is one :class:`SettingsFileError` naming the file (and
the key).

The layers, lowest first (:class:`TopicSettings`; the metadata log itself takes Kafka's defaults alone): Kafka's
defaults, ``conf/defaults.yaml`` (``kafka-index``), ``server.properties``, the cluster-wide then this broker's dynamic
defaults, the topic's config in the cluster's metadata, the topic config file's entry for the topic, the command line's ``--index-interval-bytes``/
``--segment-index-bytes``. :meth:`TopicSettings.sources` names the layer of each value.

The dynamic broker defaults the metadata hold (``kafka-configs.sh --alter --entity-type brokers``) are a layer
between ``server.properties`` and the topics' configs, as the running broker applies them to what it appends.
(Noticed, left to Kafka: whether Kafka 4.1.0's own recovery at a combined broker+controller's start applies a
dynamic default is a race; measured, some starts do and some use the static value.)"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..format.errors import KafkaIndexError, describe_error
from ..format.layout import CLUSTER_METADATA_TOPIC, parse_partition_dir_name, partition_name
from ..format.meta_properties import parse_properties
from ..recovery.settings import IndexSettings, SettingError, check_index_setting
from ..storage.discovery import read_log_dir_meta

if TYPE_CHECKING:
    from ..format.cluster_metadata import ClusterFacts, ClusterMetadata
    from ..storage.store import Store

#: the partition dir of KRaft's metadata log inside a metadata log dir
CLUSTER_METADATA_DIR = partition_name(CLUSTER_METADATA_TOPIC, 0)
#: topic config name -> our setting name (Kafka's spelling in topic config files)
TOPIC_KEYS = {"index.interval.bytes": "index_interval_bytes", "segment.index.bytes": "segment_index_bytes"}
#: broker property -> our setting name
BROKER_KEYS = {"log.index.interval.bytes": "index_interval_bytes", "log.index.size.max.bytes": "segment_index_bytes"}


class SettingsFileError(KafkaIndexError, ValueError):
    """A settings file that cannot be used; the message names the file and the key."""


#: the layer of a value nothing set
KAFKA_DEFAULT = "Kafka's default"
#: the start of the layer's name of a value the cluster's metadata hold that is not a valid setting
INVALID = "invalid: "
_JAVA_INT = r"[+-]?\d+"
SETTING_NAMES = ("index_interval_bytes", "segment_index_bytes")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


@dataclass(frozen=True)
class ClusterSettings:
    """The index settings the cluster's metadata set (:func:`load_cluster_settings`): ``per_topic`` (each topic's
    configs) and ``broker`` (setting -> (value, the layer's name): the dynamic defaults of broker ``broker_id``
    over the cluster-wide ones); ``source``: the ``__cluster_metadata-0`` dir read; ``metadata``: its state."""

    source: str
    broker_id: int | None
    per_topic: dict[str, dict[str, int]]
    broker: dict[str, tuple[int, str]]
    metadata: ClusterMetadata = field(repr=False, compare=False)
    #: topic ("" for the broker layers) -> setting -> why its value in the metadata is not a valid one
    invalid: dict[str, dict[str, str]] = field(default_factory=dict)

    def facts(self) -> ClusterFacts:
        """What each partition dir of a run is checked against (:class:`~indexlib.engine.RunOptions` ``cluster``)."""
        return self.metadata.facts(self.source)

    def describe(self) -> str:
        m = self.metadata
        start = "the log's start" if m.snapshot is None else f"the snapshot at offset {m.snapshot}"
        return (
            f"cluster metadata {self.source}: {len(m.topic_ids)} topics, {len(self.per_topic)} with index settings, "
            f"replayed from {start} to offset {m.end_offset}"
            + (f" (broker {self.broker_id})" if self.broker_id is not None else "")
            + (f"; {_plural(sum(m.skipped.values()), 'record')} skipped" if m.skipped else "")
            + (f"; it stopped early: {m.stopped}" if m.stopped else "")
        )


@dataclass(frozen=True)
class TopicSettings:
    """Each topic's index settings, layered (module docstring): ``defaults`` (Kafka's, ``conf/defaults.yaml``'s or
    a broker's: ``defaults_from`` names the layer of each one set, the others are Kafka's), then ``cluster``
    (the cluster's metadata, when read), then the topic's entry of ``per_topic`` (``per_topic_from`` names the
    file), then ``overrides`` (the command line's), each layer replacing the ones below."""

    defaults: IndexSettings = field(default_factory=IndexSettings)
    per_topic: dict[str, dict[str, int]] = field(default_factory=dict)
    overrides: dict[str, int] = field(default_factory=dict)
    cluster: ClusterSettings | None = None
    defaults_from: dict[str, str] = field(default_factory=dict)
    per_topic_from: str = "--topic-config"

    def layered(self, topic: str) -> dict[str, tuple[int, str]]:
        """Each setting of ``topic``: (value, the layer it comes from). KRaft's own metadata log takes none of the
        broker's or the cluster's layers: Kafka builds its log config from Kafka's defaults (``KafkaMetadataLog``)."""
        if topic == CLUSTER_METADATA_TOPIC:
            kafka = IndexSettings()
            values = {n: (getattr(kafka, n), f"{KAFKA_DEFAULT} (the metadata log's own)") for n in SETTING_NAMES}
        else:
            values = {n: (getattr(self.defaults, n), self.defaults_from.get(n, KAFKA_DEFAULT)) for n in SETTING_NAMES}
        if self.cluster is not None and topic != CLUSTER_METADATA_TOPIC:
            values.update(self.cluster.broker)
            values.update({n: (-1, INVALID + why) for n, why in self.cluster.invalid.get("", {}).items()})
            from_topic = f"the topic's config in the cluster metadata ({self.cluster.source})"
            values.update({n: (v, from_topic) for n, v in self.cluster.per_topic.get(topic, {}).items()})
            values.update({n: (-1, INVALID + why) for n, why in self.cluster.invalid.get(topic, {}).items()})
        values.update({n: (v, self.per_topic_from) for n, v in self.per_topic.get(topic, {}).items()})
        values.update({n: (v, "the command line") for n, v in self.overrides.items()})
        return values

    def invalid_for(self, topics: Iterable[str]) -> str | None:
        """Why a run over ``topics`` cannot use its settings (a value of the cluster's metadata that is not a
        valid one, and that no higher layer replaces), or None."""
        for topic in sorted(set(topics)):
            for _, source in self.layered(topic).values():
                if source.startswith(INVALID):
                    return source[len(INVALID) :]
        return None

    def for_topic(self, topic: str) -> IndexSettings:
        return IndexSettings(**{n: v for n, (v, _) in self.layered(topic).items()})

    def sources(self, topic: str) -> dict[str, str]:
        """Where each of ``topic``'s settings comes from (for ``-v`` and ``--json``)."""
        return {n: source for n, (_, source) in self.layered(topic).items()}


def settings_to_dict(settings: TopicSettings, topics: list[str]) -> dict[str, Any]:
    """The ``settings`` of a ``--json`` report: the cluster metadata read (or None), and for each of ``topics``
    each setting's value and the layer it comes from."""
    cluster = settings.cluster
    return {
        "cluster_metadata": None
        if cluster is None
        else {"dir": cluster.source, "broker_id": cluster.broker_id, "snapshot": cluster.metadata.snapshot,
              "end_offset": cluster.metadata.end_offset, "skipped": dict(cluster.metadata.skipped),
              "stopped": cluster.metadata.stopped},
        "topics": {
            topic: {name: {"value": value, "source": source} for name, (value, source) in settings.layered(topic).items()}
            for topic in sorted(set(topics))
        },
    }  # fmt: skip


def checked_setting(source: str, name: str, value: object) -> int:
    """:func:`check_index_setting` as a :class:`SettingsFileError`."""
    try:
        return check_index_setting(source, name, value)
    except SettingError as exc:
        raise SettingsFileError(str(exc)) from None


def read_text(path: str | os.PathLike[str], what: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except IsADirectoryError:
        raise SettingsFileError(f"{path}: {what} is a directory, expected a file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsFileError(f"{path}: cannot read {what}: {describe_error(exc)}") from None


def read_mapping(path: str | os.PathLike[str], what: str, text: str | None = None) -> dict[Any, Any]:
    """A JSON (``.json``) or YAML file holding a mapping (empty: ``{}``); ``text``: its text, when already read.
    YAML needs PyYAML (installed with the Spark extra); without it the error says so."""
    if text is None:
        text = read_text(path, what)
    try:
        if str(path).endswith(".json"):
            data = json.loads(text)
        else:
            try:
                import yaml
            except ImportError:
                raise SettingsFileError(
                    f"{path}: reading a YAML {what} needs PyYAML (pip install pyyaml); a .json file needs nothing"
                ) from None
            data = yaml.safe_load(text)
    except SettingsFileError:
        raise
    except Exception as exc:  # json.JSONDecodeError, yaml.YAMLError
        raise SettingsFileError(f"{path}: malformed {what}: {str(exc).splitlines()[0]}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SettingsFileError(f"{path}: {what} must be a mapping, got {type(data).__name__}")
    return data


def read_server_properties(path: str | os.PathLike[str]) -> tuple[list[str], dict[str, int]]:
    """``log.dirs`` (or ``log.dir``) and the index settings of a broker's ``server.properties``, read as Java
    reads it (:func:`indexlib.format.parse_properties`)."""
    props = _server_properties(path)
    log_dirs = [d.strip() for d in props.get("log.dirs", props.get("log.dir", "")).split(",") if d.strip()]
    seen: set[str] = set()
    for d in log_dirs:
        if os.path.normpath(d) in seen:  # Kafka's LogManager refuses to start on it too
            raise SettingsFileError(f"{path}: log.dirs names {d} twice; give each log dir once")
        seen.add(os.path.normpath(d))
    settings = {}
    for prop, name in BROKER_KEYS.items():
        if prop in props:
            value = java_int(props[prop])
            if value is None:
                raise SettingsFileError(f"{path}: {prop} must be an integer, got {props[prop]!r}")
            settings[name] = checked_setting(f"{path}: {prop}", name, value)
    return log_dirs, settings


def _server_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    try:
        return parse_properties(read_text(path, "server properties"))
    except ValueError as exc:  # a malformed \\uXXXX escape
        if isinstance(exc, SettingsFileError):
            raise
        raise SettingsFileError(f"{path}: malformed server properties: {exc}") from None


def metadata_log_dir(path: str | os.PathLike[str]) -> str | None:
    """The ``metadata.log.dir`` of a broker's ``server.properties`` (None: the broker keeps its metadata in the
    first of its ``log.dirs``)."""
    value = _server_properties(path).get("metadata.log.dir", "").strip()
    return value or None


def java_int(text: str) -> int | None:
    """``text`` as Kafka's config parser reads an int (trimmed, then Java's ``Integer.parseInt``: a sign and
    digits, no ``_``), or None."""
    trimmed = text.strip()
    return int(trimmed) if re.fullmatch(_JAVA_INT, trimmed) else None


def _cluster_config(source: str, what: str, key: str, name: str, value: str) -> int | str:
    """A config value of the metadata as a setting, or why it is not one (raised only if a run uses it)."""
    number = java_int(value)
    if number is None:
        return f"{source}: {what} {key} must be an integer, got {value!r}"
    try:
        return checked_setting(f"{source}: {what} {key}", name, number)
    except SettingsFileError as exc:
        return str(exc)


def cluster_settings(metadata: ClusterMetadata, source: str, broker_id: int | None) -> ClusterSettings:
    """The index settings ``metadata`` set, for broker ``broker_id`` (None: the cluster-wide defaults alone). A
    value that is not a valid setting is kept as why (``invalid``), an error only for a run that would use it."""
    per_topic: dict[str, dict[str, int]] = {}
    invalid: dict[str, dict[str, str]] = {}
    for topic, configs in metadata.topic_configs.items():
        for key, name in TOPIC_KEYS.items():
            if key in configs:
                value = _cluster_config(source, f"topic {topic!r}", key, name, configs[key])
                table = invalid if isinstance(value, str) else per_topic
                table.setdefault(topic, {})[name] = value  # type: ignore[assignment]
    broker: dict[str, tuple[int, str]] = {}
    for resource, layer in (
        ("", "the cluster-wide dynamic default"),
        (str(broker_id), f"broker {broker_id}'s dynamic config"),
    ):
        if resource != "" and broker_id is None:
            continue
        configs = metadata.broker_configs.get(resource, {})
        for key, name in BROKER_KEYS.items():
            if key in configs:
                value = _cluster_config(source, layer, key, name, configs[key])
                if isinstance(value, str):
                    invalid.setdefault("", {})[name] = value
                    broker.pop(name, None)
                else:
                    invalid.get("", {}).pop(name, None)
                    broker[name] = (value, f"{layer} in the cluster metadata")
    return ClusterSettings(source, broker_id, per_topic, broker, metadata, invalid)


def _split(path: str) -> tuple[str, str]:
    """(parent dir, name) of a local path or a URI (whose ``//`` a normpath would fold)."""
    if "://" in path:
        parent, _, name = path.rstrip("/").rpartition("/")
        return parent, name
    normal = os.path.normpath(path)
    return os.path.dirname(normal), os.path.basename(normal)


def load_cluster_settings(
    paths: list[str], named: str | None = None, metadata_dir: str | None = None, store: Store | None = None
) -> ClusterSettings | None:
    """The settings of the cluster's metadata: ``named`` (``--cluster-metadata``: a ``__cluster_metadata-0`` dir,
    or a log dir holding one; ``none``: not read), else the first of ``metadata_dir`` (``metadata.log.dir``) and
    the log dirs of ``paths`` (a partition dir's parent) that holds one; None where none does (a ZooKeeper-era
    broker, a copy without it). The broker is the one whose ``meta.properties`` is beside the metadata. ``store``:
    where ``paths`` and ``named`` are when not on the local disk (a copy of a log dir in object storage)."""
    if named is not None and named.strip().lower() == "none":
        return None
    from ..storage.cluster_metadata_files import find_cluster_metadata  # its reader, only when there is metadata

    if named is not None:
        if not named.strip():
            raise SettingsFileError("--cluster-metadata: an empty path (give a dir, or none)")
        if not (os.path.isdir(named) if store is None else store.is_dir(named)):
            exists = os.path.lexists(named) if store is None else store.exists(named)
            raise SettingsFileError(
                f"{named}: --cluster-metadata: {'not a directory' if exists else 'no such directory'}"
            )
        found = named if _split(named)[1] == CLUSTER_METADATA_DIR else find_cluster_metadata([named], store)
        if found is None:
            raise SettingsFileError(f"{named}: --cluster-metadata: no KRaft metadata ({CLUSTER_METADATA_DIR}) there")
    else:
        if store is not None:  # a copy in object storage: a broker's metadata.log.dir is on its own disk, not there
            metadata_dir = None
        if metadata_dir and not os.path.isdir(metadata_dir):
            raise SettingsFileError(f"{metadata_dir}: metadata.log.dir of --server-properties is not a directory")
        candidates = [metadata_dir] if metadata_dir else []
        for path in paths:  # a log dir, or a partition dir inside one
            parent, name = _split(path)
            is_partition = parse_partition_dir_name(name) is not None
            candidates += [path, parent] if is_partition and parent else [path]
        found = find_cluster_metadata(candidates, store)
        if found is None:
            return None
    from ..storage.cluster_metadata_files import read_cluster_metadata

    meta = read_log_dir_meta(_split(found)[0], store)
    return cluster_settings(read_cluster_metadata(found, store), found, meta.identity.broker_id)


#: the title of each topic in ``kafka-configs.sh --describe --entity-type topics`` (``--all``: every config)
_DESCRIBE_TITLE = r"(?:All|Dynamic) configs for topic (?P<name>\S+) are:"
#: one config line under it: ``  <key>=<value> sensitive=<bool> synonyms={...}``
_DESCRIBE_LINE = r"  (?P<key>[^=\s]+)=(?P<value>.*) sensitive=(?P<sensitive>true|false) synonyms=\{.*\}"


def parse_configs_describe(text: str, path: str) -> dict[str, dict[str, str]] | None:
    """Topic -> config -> value from the output of ``kafka-configs.sh --bootstrap-server ... --describe
    [--all] --entity-type topics`` as it prints it (a ZooKeeper-era broker's configs, which have no metadata log
    to read), or None when no line of ``text`` is such a title; :class:`SettingsFileError` naming the first line
    that does not read (a tool's log line before it, another entity's output) or a topic listed twice. Sensitive
    configs (shown as null) are left out."""
    lines = text.splitlines()
    if not any(re.fullmatch(_DESCRIBE_TITLE, line.rstrip()) for line in lines):
        return None
    out: dict[str, dict[str, str]] = {}
    topic = None
    for number, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if not line:
            continue
        if (title := re.fullmatch(_DESCRIBE_TITLE, line)) is not None:
            topic = title["name"]
            if topic in out:
                raise SettingsFileError(f"{path}: line {number}: topic {topic!r} is described twice")
            out[topic] = {}
        elif topic is not None and (config := re.fullmatch(_DESCRIBE_LINE, line)) is not None:
            if config["sensitive"] == "false":
                out[topic][config["key"]] = config["value"]
        else:
            raise SettingsFileError(
                f"{path}: line {number}: not a line of kafka-configs.sh --describe --entity-type topics: {line[:80]!r}"
            )
    return out


def read_topic_config(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """``{topic: {index_interval_bytes: .., segment_index_bytes: ..}}`` from a JSON or YAML file that maps topic
    names to Kafka topic configs (``index.interval.bytes``, ``segment.index.bytes``; other Kafka topic configs
    are allowed and ignored), or from the output of ``kafka-configs.sh --describe --entity-type topics`` as it is
    (:func:`parse_configs_describe`)."""
    text = read_text(path, "topic config")
    described = parse_configs_describe(text, str(path))
    data: dict[Any, Any] = read_mapping(path, "topic config", text) if described is None else described
    out: dict[str, dict[str, int]] = {}
    for topic, configs in data.items():
        if not isinstance(topic, str):  # YAML reads an unquoted on, 0123 or 1e3 as a bool or a number
            raise SettingsFileError(f"{path}: topic name {topic!r} is not a string (YAML read it so): quote it")
        if not isinstance(configs, dict):
            raise SettingsFileError(f"{path}: topic {topic!r} must map to a mapping of topic configs, got {configs!r}")
        out[str(topic)] = {}
        for key, value in configs.items():
            near = difflib.get_close_matches(str(key), list(TOPIC_KEYS), n=1, cutoff=0.85)
            if key not in TOPIC_KEYS and near:  # a misspelt index setting would silently give the default
                raise SettingsFileError(
                    f"{path}: topic {topic!r}: unknown topic config {key!r}; did you mean {near[0]!r}?"
                )
            if key in TOPIC_KEYS:
                if isinstance(value, str) and java_int(value) is not None:
                    value = java_int(value)
                out[str(topic)][TOPIC_KEYS[key]] = checked_setting(
                    f"{path}: topic {topic!r} {key}", TOPIC_KEYS[key], value
                )
    return out
