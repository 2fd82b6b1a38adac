"""Kafka's own message definitions (``common/message/*.json`` inside the 4.1.0 jars in ``../shared``), read into
the shape of :mod:`indexlib.format.message_schema`, so a test can hold our transcription to them field for field.

A definition's field ``Name`` becomes the key Kafka's JSON converters write (first letter in lower case);
``versions`` / ``nullableVersions`` / ``taggedVersions`` become ``since`` / ``until`` / ``nullable_since``;
a struct's fields (inline or from ``commonStructs``) become ``struct``.
"""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path
from typing import Any

from indexlib.format.message_schema import Field, Message

from ..conftest import PROJECT_ROOT

#: the jars of the Kafka distribution in ``../shared``
KAFKA_LIBS = PROJECT_ROOT.parent / "shared" / "kafka_2.13-4.1.0" / "libs"

_PRIMITIVES = {"int8", "int16", "int32", "int64", "uint16", "uuid", "bool", "float64", "string", "bytes"}


def load_definitions(libs: Path = KAFKA_LIBS) -> dict[str, dict[str, Any]]:
    """Every ``common/message/*.json`` and ``common/metadata/*.json`` of the broker's jars under ``libs``, and the
    ``message/*.json`` of its storage jar (``__remote_log_metadata``'s records), by message name (comments
    stripped)."""
    found: dict[str, dict[str, Any]] = {}
    for jar in sorted(libs.glob("kafka*.jar")):
        if jar.name.startswith("kafka-streams"):  # Streams' own (non-JSON comments); no record of a log dir
            continue
        with zipfile.ZipFile(jar) as z:
            for name in z.namelist():
                if name.startswith(("common/message/", "common/metadata/", "message/")) and name.endswith(".json"):
                    text = re.sub(r"^\s*(//.*|/\*.*\*/\s*)$", "", z.read(name).decode("utf-8"), flags=re.M)
                    definition = json.loads(text)
                    found[definition["name"]] = definition
    return found


def _range(spec: str | None) -> tuple[int, int | None] | None:
    if spec is None or spec == "none":
        return None
    if spec.endswith("+"):
        return int(spec[:-1]), None
    low, _, high = spec.partition("-")
    return int(low), int(high or low)


def _default(field: dict[str, Any], type_name: str) -> Any:
    raw = field.get("default")
    if type_name in ("int8", "int16", "int32", "int64", "uint16"):
        return int(raw) if raw not in (None, "") else 0
    if type_name == "bool":
        return raw in (True, "true")
    if type_name == "float64":
        return float(raw or 0)
    if type_name == "string":
        return None if raw == "null" else (raw or "")
    if "default" in field and raw in (None, "null"):
        return None
    return Field.UNSET


def _field(field: dict[str, Any], common: dict[str, list[dict[str, Any]]]) -> Field:
    kind: str = field["type"]
    element = kind[2:] if kind.startswith("[]") else kind
    struct: tuple[Field, ...] = ()
    if element not in _PRIMITIVES:
        sub = field.get("fields") or common[element]
        struct = tuple(_field(f, common) for f in sub)
        type_name = "[]" if kind.startswith("[]") else "struct"
    else:
        type_name = kind
    since, until = _range(field.get("versions") or field.get("taggedVersions")) or (0, None)
    tagged = _range(field.get("taggedVersions"))
    nullable = _range(field.get("nullableVersions"))
    name = field["name"][0].lower() + field["name"][1:]
    return Field(
        name,
        type_name,
        since=tagged[0] if tagged else since,
        until=until,
        nullable_since=nullable[0] if nullable else None,
        default=_default(field, type_name),
        tag=field.get("tag"),
        struct=struct,
    )


def message(definition: dict[str, Any]) -> Message:
    """One definition as a :class:`Message`."""
    common = {c["name"]: c["fields"] for c in definition.get("commonStructs", ())}
    versions = _range(definition["validVersions"])
    assert versions is not None
    flexible = _range(definition.get("flexibleVersions"))
    return Message(
        definition["name"],
        (versions[0], versions[1] if versions[1] is not None else versions[0]),
        flexible[0] if flexible else None,
        tuple(_field(f, common) for f in definition["fields"]),
    )
