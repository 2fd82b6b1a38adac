"""A run's :class:`~indexlib.engine.RunOptions` from a command line's parsed arguments, built and checked the same
way by ``python -m indexlib`` and ``kafka-index`` (a flag one of them lacks takes the engine's default)."""

from __future__ import annotations

import argparse

from ..engine.options import RunOptions, check_run, new_run_id
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
    """Everything a run is refused for before it starts (a ``ValueError`` with the one line to print): a topic's
    settings that Kafka would not take, then :func:`~indexlib.engine.check_run`."""
    invalid = settings.invalid_for(p.topic for p in found.partitions)
    if invalid is not None:
        raise SettingError(invalid)
    check_run(found, options)
