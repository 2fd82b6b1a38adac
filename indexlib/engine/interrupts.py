"""How a command stops early: on SIGINT or SIGTERM without leaving anything half done, and quietly when
the reader of its stdout goes away.

A command line runs inside :func:`stop_on_signals`: either signal raises :class:`Interrupted` (a
``KeyboardInterrupt``) in the main thread, so every ``finally`` of the run executes (staged files are swept,
run locks released, a process pool stopped) and the command ends with one line and exit code 128 + the
signal's number (130 for SIGINT, 143 for SIGTERM). Python's default for SIGTERM is to die on the spot,
skipping all of that.

:func:`deferred_signals` marks a step that must not be cut in the middle (one segment's commit: its
journal record, its renames, its audit row): a signal arriving inside is held and delivered, to whatever
handler was in place, when the step ends.

A closed stdout (``dump FILE | head -1``) ends a command as it ends a Unix tool killed by SIGPIPE: no
message, exit code 141 (128 + SIGPIPE) (:func:`stdout_closed`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType

#: the signals that stop a run
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
#: the exit code of a command whose stdout was closed: a shell's for a process killed by SIGPIPE
EXIT_STDOUT_CLOSED = 128 + signal.SIGPIPE


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived: the run stops. ``exit_code`` is the shell's for that signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stopped_by(exc: KeyboardInterrupt) -> tuple[str, int]:
    """The signal's name and the exit code for an interruption (a bare ``KeyboardInterrupt`` is SIGINT's)."""
    if isinstance(exc, Interrupted):
        return exc.name, exc.exit_code
    return "SIGINT", 128 + signal.SIGINT


#: the stops the handler of the outermost :func:`stop_on_signals` block raised (see :func:`received`)
_received: list[Interrupted] = []
_depth = 0


def _raise_interrupted(signum: int, frame: FrameType | None) -> None:
    stop = Interrupted(signum)
    _received.append(stop)
    raise stop


def received() -> Interrupted | None:
    """The last stop raised in the current :func:`stop_on_signals` block, or None. Cleanup that runs while a
    stop unwinds may fail and replace it (a call to a Spark JVM that hung up): the caller can still tell
    that the run was stopped, not failed."""
    return _received[-1] if _received else None


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """For the block, SIGINT and SIGTERM raise :class:`Interrupted` in the main thread; the previous handlers
    are restored after; an ignored signal stays ignored. Call it again after a library replaced a handler (PySpark's SparkContext installs its
    own for SIGINT). Outside the main thread (where handlers cannot be set) it does nothing."""
    global _depth
    if not _in_main_thread():
        yield
        return
    if _depth == 0:
        _received.clear()
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    # an ignored signal stays ignored (a shell starts background jobs with SIGINT ignored); None: a handler
    # set outside Python, which could not be restored
    taken = [s for s, handler in previous.items() if handler not in (None, signal.SIG_IGN)]
    for s in taken:
        signal.signal(s, _raise_interrupted)
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        for s in taken:
            signal.signal(s, previous[s])


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """A step that must not be cut in the middle: SIGINT or SIGTERM arriving inside it is held, then raised
    again (to the handler in place before) as soon as the step ends, so the run stops between two steps.
    Outside the main thread it does nothing (signals are only handled there)."""
    if not _in_main_thread():
        yield
        return
    previous = {s: signal.getsignal(s) for s in STOP_SIGNALS}
    held: list[int] = []

    def hold(signum: int, frame: FrameType | None) -> None:
        held.append(signum)

    deferring = [s for s, handler in previous.items() if handler not in (None, signal.SIG_IGN)]
    for s in deferring:
        signal.signal(s, hold)
    try:
        yield
    finally:
        for s in deferring:
            signal.signal(s, previous[s])
        for signum in dict.fromkeys(held):  # each once, in order of arrival
            signal.raise_signal(signum)


def stdout_closed() -> int:
    """The reader of stdout went away (a ``BrokenPipeError``): point stdout at ``/dev/null``, so that the
    interpreter's last flush cannot fail again and print, and return :data:`EXIT_STDOUT_CLOSED`."""
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    return EXIT_STDOUT_CLOSED
