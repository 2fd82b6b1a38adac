"""A broker's ``remote-log-index-cache``: the copies of remote index objects Kafka's ``RemoteIndexCache`` keeps
under its first log dir, ``<start offset>_<segment id>.{index,timeindex,txnindex}`` (a ``.tmp`` while one is
fetched, ``.deleted`` while one is removed), loaded again at every start, so a broker serves a cached copy until
it is gone, whatever the bucket holds now.

Invariants: listing is read-only; :func:`remove_cache_entries` deletes exactly the files it is given, under the
broker's ``.lock`` (a broker that starts meanwhile fails to lock its log dir).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from ..format.layout import REMOTE_INDEX_CACHE_DIR, parse_remote_cache_name
from .locks import broker_locks
from .publish import fsync_path


@dataclass
class CacheEntry:
    """One cached segment: its start offset and id, its files by suffix (``.index``, ...) and the files of it
    that are half fetched or being deleted (``.tmp``, ``.deleted``)."""

    start_offset: int
    segment_id: str
    files: dict[str, str] = field(default_factory=dict)
    transient: list[str] = field(default_factory=list)


def cache_dir_of(path: str) -> str:
    """The cache dir ``path`` names: itself, or the ``remote-log-index-cache`` inside the log dir it is."""
    inside = os.path.join(path, REMOTE_INDEX_CACHE_DIR)
    return inside if os.path.isdir(inside) else path


def list_cache_entries(cache_dir: str) -> tuple[list[CacheEntry], list[str]]:
    """(the cached segments by start offset and id, the names that are not a cache entry's)."""
    entries: dict[tuple[int, str], CacheEntry] = {}
    foreign = []
    for name in sorted(os.listdir(cache_dir)):
        m = parse_remote_cache_name(name)
        if m is None:
            foreign.append(name)
            continue
        key = (int(m["start"] or 0), m["segment_id"] or "")
        entry = entries.setdefault(key, CacheEntry(*key))
        path = os.path.join(cache_dir, name)
        if m["state"]:
            entry.transient.append(path)
        else:
            entry.files[f".{m['suffix']}"] = path
    return [entries[k] for k in sorted(entries)], foreign


def read_cached(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def remove_cache_entries(cache_dir: str, paths: list[str]) -> list[str]:
    """Delete ``paths`` (files of ``cache_dir``) holding the ``.lock`` of the log dir around it, as a broker would
    (:class:`~indexlib.storage.locks.LockedLogDirError` while a broker runs there); the paths removed."""
    log_dir = os.path.dirname(os.path.abspath(cache_dir))
    removed = []
    with broker_locks([log_dir], False, "stop the broker before repairing its remote-log-index-cache"):
        for path in paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                continue
            removed.append(path)
        fsync_path(cache_dir)
    return removed
