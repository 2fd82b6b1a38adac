"""A run's :class:`~indexlib.engine.RunOptions` from a command line's parsed arguments, built and checked the same
way by ``python -m indexlib`` and ``kafka-index`` (a flag one of them lacks takes the engine's default)."""

from __future__ import annotations

import argparse

from ..engine.options import RunOptions, check_run, new_run_id
from ..engine.runner import check_locks_free
from ..format.errors import KafkaIndexError
from ..recovery.settings import SettingError
from ..storage.discovery import Discovery
from ..storage.store import LOCAL, StoreSpec, is_uri, spec_for
from .settings_files import TopicSettings


def key_values(pairs: list[str] | None, flag: str) -> dict[str, str]:
    """``KEY=VALUE`` arguments of a repeatable ``flag`` as a mapping (a value may hold ``=``); :class:`SettingError`
    naming the flag for a pair without ``=`` or with an empty key."""
    options = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise SettingError(f"{flag}: expected KEY=VALUE, got {pair!r}")
        options[key.strip()] = value
    return options


def store_spec(paths: list[str], pairs: list[str] | None, output_dir: str | None = None) -> StoreSpec:
    """The store the run's ``paths`` are in, with ``--storage-option KEY=VALUE`` pairs (a ``ValueError`` naming a
    malformed pair, paths in two stores, or options where neither the paths nor ``output_dir`` are in object
    storage)."""
    options = key_values(pairs, "--storage-option")
    spec = spec_for(paths, options)
    if options and spec == LOCAL and not (output_dir and is_uri(output_dir)):
        raise SettingError(
            "--storage-option is for log dirs in object storage (s3://, gs://, abfs://); these are local"
        )
    return spec


def output_spec(output_dir: str | None, pairs: list[str] | None) -> StoreSpec:
    """Where ``--output-dir`` is: a prefix in object storage (with the ``--storage-option`` pairs), else local."""
    if not output_dir or not is_uri(output_dir):
        return LOCAL
    return spec_for([output_dir], key_values(pairs, "--storage-option"))


def run_options(
    command: str, args: argparse.Namespace, settings: TopicSettings, backup_root: str | None, store: StoreSpec = LOCAL
) -> RunOptions:
    """The options of ``command`` run with ``args``: a new run id unless ``--run-id`` names one (``''`` is kept, for
    :func:`check_run` to refuse); ``backup_root`` as the command line resolved it; the cluster's facts when
    ``settings`` read its metadata; the ``store`` the log dirs are in."""
    run_id = getattr(args, "run_id", None)
    return RunOptions(
        command,
        new_run_id(command) if run_id is None else run_id,
        getattr(args, "output_dir", None),
        getattr(args, "dry_run", False),
        getattr(args, "truncate_corrupt_tail", False),
        getattr(args, "force", False),
        backup_root,
        getattr(args, "broker_id", None),
        getattr(args, "sync", "fsync"),
        settings.cluster.facts() if settings.cluster is not None else None,
        store,
        output_spec(getattr(args, "output_dir", None), getattr(args, "storage_option", None)),
    )


def check_planned_run(found: Discovery, options: RunOptions, settings: TopicSettings) -> None:
    """Everything a run is refused for before it starts, with the one line to print: a topic's settings that Kafka
    would not take, then :func:`~indexlib.engine.check_run` (``ValueError``s), then a lock the run cannot take
    (``LockedLogDirError``: :func:`~indexlib.engine.runner.check_locks_free`)."""
    invalid = settings.invalid_for(p.topic for p in found.partitions)
    if invalid is not None:
        raise SettingError(invalid)
    check_run(found, options)
    check_locks_free(found, options)


class NotYetTieredError(KafkaIndexError, ValueError):
    """``--not-yet-tiered`` without ``__remote_log_metadata`` to read: one line, exit 2."""


def select_not_yet_tiered(found: Discovery, settings: TopicSettings, metadata_dirs: list[str]) -> Discovery:
    """``--not-yet-tiered``: of the partitions of tiered topics (a ``remote.storage.enable=true`` topic of the
    cluster's metadata, or one ``__remote_log_metadata`` lists segments of), only the local segments whose base is
    above the partition's highest remote end offset: what the broker has yet to copy (KAFKA-15401: it uploads a
    local index without checking it). The metadata is read from the run's log dirs and ``metadata_dirs``.
    Segments below stay out of the run as if retention had deleted them (the replay starts at the first one kept,
    from the snapshot at its base)."""
    from dataclasses import replace

    from ..storage.remote_log_metadata_files import find_remote_log_metadata, read_remote_log_metadata

    dirs = [d for d in dict.fromkeys([*found.log_dirs, *metadata_dirs]) if not is_uri(d)]
    if not find_remote_log_metadata(dirs):
        raise NotYetTieredError(
            f"--not-yet-tiered: no __remote_log_metadata-N partition dir in {', '.join(dirs)}; give the log dir of a "
            "broker that holds one with --remote-log-metadata DIR"
        )
    inventory = read_remote_log_metadata(dirs)
    ends: dict[tuple[str, int], int] = {}
    for s in inventory.segments.values():
        if s.state in ("COPY_SEGMENT_STARTED", "COPY_SEGMENT_FINISHED") and not s.orphan_update:
            key = (s.topic, s.partition)
            ends[key] = max(ends.get(key, -1), s.end_offset)
    tiered = {topic for topic, _ in ends}
    if settings.cluster is not None:
        configs = settings.cluster.metadata.topic_configs
        tiered |= {t for t, c in configs.items() if c.get("remote.storage.enable", "").strip().lower() == "true"}
    kept = []
    for p in found.partitions:
        if p.topic not in tiered:
            continue
        end = ends.get((p.topic, p.partition), -1)
        segments = [s for s in p.segments if s.base_offset > end]
        if segments:
            kept.append(replace(p, segments=segments))
    return replace(found, partitions=kept)
