"""A log dir's ``meta.properties``: which broker of which cluster the dir belongs to.

Kafka writes it with ``java.util.Properties.store`` (``#`` comments, ``key=value`` lines, ``\\`` escapes):

* ``version=0`` (ZooKeeper-era brokers): ``broker.id``, and ``cluster.id`` once the broker saw a cluster;
* ``version=1`` (KRaft): ``node.id`` and ``cluster.id``, and ``directory.id`` (the log dir's own id, Kafka 3.7+).

:func:`parse_meta_properties` turns the text into a :class:`BrokerIdentity`, refusing what Kafka's
``MetaProperties`` would refuse (an unknown version, a missing or non-integer id). A pure function: the file
is read by ``indexlib.storage``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import KafkaIndexError

META_PROPERTIES = "meta.properties"


class MetaPropertiesError(KafkaIndexError, ValueError):
    """A ``meta.properties`` that Kafka would refuse to load (the message names the file and the problem)."""


@dataclass(frozen=True)
class BrokerIdentity:
    """Whose log dir this is. Every field may be None: a log dir without ``meta.properties`` names nobody
    (unless the operator names its broker), and ZooKeeper-era dirs have no ``directory.id``."""

    cluster_id: str | None = None
    broker_id: int | None = None
    directory_id: str | None = None

    def to_dict(self) -> dict[str, str | int | None]:
        return {"cluster_id": self.cluster_id, "broker_id": self.broker_id, "directory_id": self.directory_id}

    def describe(self) -> str:
        """``broker 3 of cluster abc`` (what a report line says), ``unknown broker`` when nothing is known."""
        who = f"broker {self.broker_id}" if self.broker_id is not None else "unknown broker"
        return who + (f" of cluster {self.cluster_id}" if self.cluster_id else "")


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` of ``text`` (``=``, ``:`` or blank separators, continuation lines, escapes, ``#``
    and ``!`` comments), by ``javaproperties``; ``ValueError`` for a malformed ``\\uXXXX`` escape. A text without
    a backslash (every ``meta.properties`` a broker writes) has no escape or continuation line: it is read here,
    by the same rules, without importing ``javaproperties`` (whose XML half pulls in urllib, http and email:
    ~40 ms of every run's start)."""
    if "\\" not in text:
        return _plain_properties(text)
    import javaproperties

    props: dict[str, str] = javaproperties.loads(text)
    return props


_BLANKS = " \t\f"


def _plain_properties(text: str) -> dict[str, str]:
    """``Properties.load`` of a text without a backslash: per line, leading blanks skipped; blank lines and ``#``
    / ``!`` comments ignored; the key ends at the first ``=``, ``:`` or blank, then blanks, at most one ``=`` or
    ``:``, and blanks again are skipped; the rest of the line is the value (the last of a repeated key wins)."""
    props: dict[str, str] = {}
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        line = line.lstrip(_BLANKS)
        if not line or line[0] in "#!":
            continue
        end = next((i for i, c in enumerate(line) if c in "=:" or c in _BLANKS), len(line))
        rest = line[end:].lstrip(_BLANKS)
        if rest[:1] in ("=", ":"):
            rest = rest[1:].lstrip(_BLANKS)
        props[line[:end]] = rest
    return props


def _int(props: dict[str, str], name: str, path: str) -> int:
    text = props[name].strip()
    try:
        value = int(text)
    except ValueError:
        raise MetaPropertiesError(f"{path}: {name} must be an integer, got {text!r}") from None
    if not -(2**31) <= value < 2**31:
        raise MetaPropertiesError(f"{path}: {name} {value} is outside Java's int")
    return value


def parse_meta_properties(text: str, path: str) -> BrokerIdentity:
    """The identity ``meta.properties`` names. :class:`MetaPropertiesError` naming ``path`` for what Kafka
    would refuse: no or an unknown ``version``, a version 0 file without ``broker.id``, a version 1 file
    without ``node.id`` or ``cluster.id``, an id that is not an integer."""
    try:
        props = parse_properties(text)
    except ValueError as exc:  # a malformed \\uXXXX escape
        raise MetaPropertiesError(f"{path}: malformed properties: {exc}") from None
    version = props.get("version", "").strip()
    cluster_id = props.get("cluster.id", "").strip() or None
    directory_id = props.get("directory.id", "").strip() or None
    if version == "0":
        if "broker.id" not in props:
            raise MetaPropertiesError(f"{path}: version 0 (ZooKeeper-era) but no broker.id")
        return BrokerIdentity(cluster_id, _int(props, "broker.id", path), directory_id)
    if version == "1":
        missing = [name for name in ("node.id", "cluster.id") if not props.get(name, "").strip()]
        if missing:
            raise MetaPropertiesError(f"{path}: version 1 (KRaft) but no {' and no '.join(missing)}")
        return BrokerIdentity(cluster_id, _int(props, "node.id", path), directory_id)
    if not version:
        raise MetaPropertiesError(f"{path}: no version (not a Kafka meta.properties)")
    raise MetaPropertiesError(f"{path}: unknown version {version!r} (Kafka knows 0 and 1)")
