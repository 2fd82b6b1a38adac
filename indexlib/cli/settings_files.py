"""The files a run's index settings come from, read the same way by both command lines: a broker's
``server.properties`` (``log.dirs`` and the broker-wide index settings) and a topic config file (topic ->
Kafka topic configs, JSON or YAML). Every value is checked with :func:`indexlib.recovery.check_index_setting`;
every problem is one :class:`SettingsFileError` naming the file (and the key).

The layers, lowest first: Kafka's defaults, ``server.properties``, the topic config's entry for the topic, the
command line's ``--index-interval-bytes``/``--segment-index-bytes`` (:class:`TopicSettings`)."""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..format.errors import KafkaIndexError, describe_error
from ..format.meta_properties import parse_properties
from ..recovery.settings import IndexSettings, SettingError, check_index_setting

#: topic config name -> our setting name (Kafka's spelling in topic config files)
TOPIC_KEYS = {"index.interval.bytes": "index_interval_bytes", "segment.index.bytes": "segment_index_bytes"}
#: broker property -> our setting name
BROKER_KEYS = {"log.index.interval.bytes": "index_interval_bytes", "log.index.size.max.bytes": "segment_index_bytes"}


class SettingsFileError(KafkaIndexError, ValueError):
    """A settings file that cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class TopicSettings:
    """Each topic's index settings: ``defaults`` (Kafka's, or a broker's), then the topic's entry of
    ``per_topic``, then ``overrides`` (the command line's), each layer replacing the one below."""

    defaults: IndexSettings = field(default_factory=IndexSettings)
    per_topic: dict[str, dict[str, int]] = field(default_factory=dict)
    overrides: dict[str, int] = field(default_factory=dict)

    def for_topic(self, topic: str) -> IndexSettings:
        values = {
            "index_interval_bytes": self.defaults.index_interval_bytes,
            "segment_index_bytes": self.defaults.segment_index_bytes,
        }
        values.update(self.per_topic.get(topic, {}))
        values.update(self.overrides)
        return IndexSettings(**values)


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


def read_mapping(path: str | os.PathLike[str], what: str) -> dict[Any, Any]:
    """A JSON (``.json``) or YAML file holding a mapping (empty: ``{}``). YAML needs PyYAML (installed with the
    Spark extra); without it the error says so."""
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
    try:
        props = parse_properties(read_text(path, "server properties"))
    except ValueError as exc:  # a malformed \\uXXXX escape
        if isinstance(exc, SettingsFileError):
            raise
        raise SettingsFileError(f"{path}: malformed server properties: {exc}") from None
    log_dirs = [d.strip() for d in props.get("log.dirs", props.get("log.dir", "")).split(",") if d.strip()]
    seen: set[str] = set()
    for d in log_dirs:
        if os.path.normpath(d) in seen:  # Kafka's LogManager refuses to start on it too
            raise SettingsFileError(f"{path}: log.dirs names {d} twice; give each log dir once")
        seen.add(os.path.normpath(d))
    settings = {}
    for prop, name in BROKER_KEYS.items():
        if prop in props:
            try:
                value = int(props[prop].strip())
            except ValueError:
                raise SettingsFileError(f"{path}: {prop} must be an integer, got {props[prop]!r}") from None
            settings[name] = checked_setting(f"{path}: {prop}", name, value)
    return log_dirs, settings


def read_topic_config(path: str | os.PathLike[str]) -> dict[str, dict[str, int]]:
    """``{topic: {index_interval_bytes: .., segment_index_bytes: ..}}`` from a JSON or YAML file that maps topic
    names to Kafka topic configs (``index.interval.bytes``, ``segment.index.bytes``; other Kafka topic configs
    are allowed and ignored)."""
    data = read_mapping(path, "topic config")
    out: dict[str, dict[str, int]] = {}
    for topic, configs in data.items():
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
                if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                    value = int(value)
                out[str(topic)][TOPIC_KEYS[key]] = checked_setting(
                    f"{path}: topic {topic!r} {key}", TOPIC_KEYS[key], value
                )
    return out
