"""The one engine every command runs: a run over discovered partitions (:func:`run`: plan the segment tasks,
map them, replay each partition (as its outcomes arrive), decide and commit each segment): the one door. ``verify_partition`` and
``rebuild_partition`` are calls of it for one partition dir.

Modules, one stage each: ``options`` (a run's options and the checks before it touches anything),
``segment_task`` (one segment's scan, plan, checks and staging, anywhere),
``pool`` (the map step on one machine), ``replay`` (producer state per partition, on the driver), ``commit``
(decide and commit one segment), ``identity`` (whose log dirs: meta.properties), ``runner`` (a whole run and
its report), ``partition`` (one partition dir through ``run``), ``interrupts`` (how a command stops on a signal).

Imports ``format``, ``recovery`` and ``storage``; every file it reads or writes goes through ``storage``
(``tests/test_architecture.py``). The names below are the engine's door for the command
lines and the Spark job."""

from ..storage import LockedLogDirError, RunInUseError, StagingClosedError, state_dir
from .commit import Decision, SegmentResult, files_to_replace
from .identity import log_dir_identities
from .interrupts import received, stdout_closed, stop_on_signals, stopped_by
from .options import (
    MODES,
    RunOptionError,
    RunOptions,
    TargetDirError,
    check_outside_log_dirs,
    check_run,
    new_run_id,
)
from .partition import rebuild_partition, verify_partition
from .pool import WorkerDiedError, map_locally
from .remote import RemoteSegmentOutcome, RemoteSegmentTask, verify_remote_segment, verify_remote_segments
from .runner import CommitObserver, RunReport, run, summary_rows
from .segment_task import Arrived, MapSegments, SegmentOutcome, SegmentTask, process_segment, process_segments

__all__ = [
    "Arrived",
    "CommitObserver",
    "Decision",
    "LockedLogDirError",
    "MODES",
    "MapSegments",
    "RunInUseError",
    "StagingClosedError",
    "RunOptionError",
    "RunOptions",
    "RunReport",
    "RemoteSegmentOutcome",
    "RemoteSegmentTask",
    "SegmentOutcome",
    "SegmentResult",
    "SegmentTask",
    "TargetDirError",
    "WorkerDiedError",
    "check_outside_log_dirs",
    "check_run",
    "files_to_replace",
    "log_dir_identities",
    "map_locally",
    "new_run_id",
    "process_segment",
    "process_segments",
    "rebuild_partition",
    "verify_remote_segment",
    "verify_remote_segments",
    "received",
    "run",
    "state_dir",
    "stdout_closed",
    "stop_on_signals",
    "stopped_by",
    "summary_rows",
    "verify_partition",
]
