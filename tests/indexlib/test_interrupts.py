"""Stopping on SIGINT and SIGTERM (``indexlib.engine.interrupts``): the handlers themselves with real signals sent to
this process, and ``python -m indexlib rebuild`` as a real process tree (the driver and its pool) stopped by
real signals in its scan and in its commit: one line, exit 128 + the signal, nothing staged or locked left,
every segment whole, no process of the run left behind."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from indexlib.engine import rebuild_partition
from indexlib.engine.interrupts import Interrupted, deferred_signals, received, stop_on_signals, stopped_by
from indexlib.format.layout import INDEX_SUFFIXES
from indexlib.testing.generate import generate_partition

from ..conftest import PROJECT_ROOT, descendants, identities, running


# ------------------------------------------------------------------------------------------ the handlers
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_raises_interrupted_with_the_shells_exit_code(signum):
    previous = signal.getsignal(signum)
    with pytest.raises(Interrupted) as stop, stop_on_signals():
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler raises long before
    assert stop.value.signum == signum and stop.value.exit_code == 128 + signum
    assert stopped_by(stop.value) == (signal.Signals(signum).name, 128 + signum)
    assert received() is stop.value
    assert signal.getsignal(signum) == previous  # restored
    assert stopped_by(KeyboardInterrupt()) == ("SIGINT", 130)  # Python's own, from a terminal


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_inside_a_deferred_step_arrives_when_the_step_ends(signum):
    steps = []
    with pytest.raises(Interrupted) as stop, stop_on_signals():
        with deferred_signals():
            os.kill(os.getpid(), signum)
            time.sleep(0.2)  # the handler would have raised here
            steps.append("first step done")
        steps.append("second step")  # never reached: the held signal is raised as the first step ends
    assert steps == ["first step done"] and stop.value.signum == signum


def test_an_ignored_signal_stays_ignored():
    """A shell starts background jobs with SIGINT ignored: the command must not take it back."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with stop_on_signals(), deferred_signals():
            assert signal.getsignal(signal.SIGINT) == signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.1)
    finally:
        signal.signal(signal.SIGINT, previous)


# --------------------------------------------------------------------------- python -m indexlib, stopped
def sha256s(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".")
    }


def damaged_logs(root: Path, partitions: int = 60) -> Path:
    """Partitions whose .index files are missing and .timeindex files torn: a rebuild rewrites them all."""
    logs = root / "logs"
    for p in range(partitions):
        part = logs / f"orders-{p}"
        generate_partition(part, segments=2, batches_per_segment=40, transactional_producers=1, seed=p)
        rebuild_partition(part)
        for index in part.glob("*.index"):
            index.unlink()
        for times in part.glob("*.timeindex"):
            with open(times, "r+b") as f:
                f.truncate(max(0, os.path.getsize(times) - 5))
    return logs


def rebuilt(logs: Path, root: Path) -> dict[str, str]:
    copy = root / "expected"
    shutil.copytree(logs, copy)
    for part in copy.iterdir():
        rebuild_partition(part)
    return sha256s(copy)


def whole_segments(before: dict[str, str], after: dict[str, str], expected: dict[str, str]) -> int:
    """Each segment's index files replaced all together or not at all, each by the whole rebuilt file;
    returns how many segments were replaced."""
    segments: dict[str, set[str]] = {}
    for name in {*before, *after, *expected}:
        stem, suffix = os.path.splitext(name)
        if suffix in INDEX_SUFFIXES:
            segments.setdefault(stem, set()).add(name)
    replaced = 0
    for stem, names in sorted(segments.items()):
        changed = {n for n in names if after.get(n) != before.get(n)}
        due = {n for n in names if expected.get(n) != before.get(n)}
        assert changed in (set(), due), f"{stem}: {sorted(changed)} of {sorted(due)} replaced"
        assert all(after.get(n) == expected.get(n) for n in changed), stem
        replaced += bool(changed)
    return replaced


def hidden_files(root: Path) -> list[str]:
    """Staged files and run locks: hidden names."""
    return sorted(str(p.relative_to(root)) for p in root.rglob(".*"))


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def signal_in_phase(driver: int, logs: Path, phase: str, signum: int, to_group: bool, seen: dict[int, str]) -> bool:
    """Send ``signum`` to the run (its whole process group, or its driver alone) if it is in ``phase`` now;
    True once sent. On a loaded machine the run may go on for a long while between a look at its files and a
    signal, so the run is frozen (SIGSTOP to its group) for the look, signalled while frozen, then let go:
    the signal is handled exactly in the state seen. The scan: files staged, none installed, a pool worker
    alive (the pool is joined before the first install). The commit: some installed, some still staged.
    ``seen`` gains the run's processes as they were when frozen."""
    staged = any(logs.glob("*/.*.rebuild.tmp"))
    installed = any(logs.glob("*/*.index"))
    if not (staged and (installed if phase == "commit" else not installed)):
        return False
    os.killpg(driver, signal.SIGSTOP)
    try:
        group = {driver, *descendants(driver)}
        seen.update(identities(group - {driver}))
        deadline = time.monotonic() + 10
        while any(_state(p) not in ("T", "Z", None) for p in group) and time.monotonic() < deadline:
            time.sleep(0.001)
        staged = any(logs.glob("*/.*.rebuild.tmp"))
        installed = any(logs.glob("*/*.index"))
        if phase == "commit":
            caught = staged and installed
        else:
            workers = [p for p in descendants(driver) if _state(p) not in ("Z", None)]
            caught = staged and not installed and bool(workers)
        if caught:
            (os.killpg if to_group else os.kill)(driver, signum)
        return caught
    finally:
        os.killpg(driver, signal.SIGCONT)


@pytest.mark.parametrize(
    "signum, to_group, phase",
    [
        (signal.SIGINT, True, "scan"),  # Ctrl-C: the terminal signals the driver and every pool worker
        (signal.SIGTERM, False, "scan"),  # kill PID: only the driver (today's default killed it, orphaning the pool)
        (signal.SIGINT, True, "commit"),
        (signal.SIGTERM, False, "commit"),
    ],
    ids=["sigint-scan", "sigterm-scan", "sigint-commit", "sigterm-commit"],
)
def test_a_signal_stops_a_rebuild_in_one_line_and_leaves_it_whole(tmp_path, signum, to_group, phase):
    """``rebuild`` in place with a pool of two, stopped while the pool stages files or once the first
    segment is installed: exit 128 + the signal, one line naming it, no staged file or run lock left, no
    process of the run left, each segment's files replaced all together or not at all (the scan: none), and
    a second rebuild finishes the work."""
    logs = damaged_logs(tmp_path)
    before, expected = sha256s(logs), rebuilt(logs, tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "indexlib", "rebuild", str(logs), "--jobs", "2"],
        cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    seen: dict[int, str] = {}
    try:
        sent = False
        deadline = time.monotonic() + 120
        while not sent and proc.poll() is None and time.monotonic() < deadline:
            seen.update(identities(descendants(proc.pid)))
            sent = signal_in_phase(proc.pid, logs, phase, signum, to_group, seen)
            time.sleep(0.001)
        _, stderr = proc.communicate(timeout=60)
        if not sent:
            pytest.fail(f"the rebuild ended before it could be stopped in its {phase}: {stderr[-2000:]}")
        time.sleep(0.5)  # a worker SIGKILLed with its parent takes a moment to be gone
        assert seen and running(seen) == [], "processes of the run left behind"
    finally:
        for pid in running(seen):  # only this run's own processes, by PID and start time
            os.kill(pid, signal.SIGKILL)
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, stderr
    assert stderr.splitlines() == [
        f"python -m indexlib: error: stopped by {name}; every index file is the old one or the whole new one "
        "(run it again to finish)"
    ]
    assert hidden_files(logs) == []
    after = sha256s(logs)
    replaced = whole_segments(before, after, expected)
    assert replaced == 0 if phase == "scan" else replaced > 0
    assert all(after[k] == v for k, v in before.items() if k.endswith(".log"))
    again = subprocess.run(
        [sys.executable, "-m", "indexlib", "rebuild", str(logs), "--jobs", "2"],
        cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert sha256s(logs) == expected and hidden_files(logs) == []
