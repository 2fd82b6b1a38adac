"""What every ``kafka-index`` subcommand shares: the program's name, the usage error and the exit codes
beyond 0, 1 and 2 (see :mod:`jobs.cli`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

PROG = "kafka-index"
_running_as = PROG


def prog() -> str:
    """The name an error line starts with: ``kafka-index``, or ``python -m indexlib`` while its ``repair`` (this
    package's code, :func:`jobs.cli.indexlib_repair`) runs."""
    return _running_as


@contextmanager
def running_as(name: str) -> Iterator[None]:
    """Error lines say ``name`` within the block (the program the user ran)."""
    global _running_as
    before, _running_as = _running_as, name
    try:
        yield
    finally:
        _running_as = before


class UsageError(Exception):
    """Bad usage or bad input: one message, exit code 2."""


#: the work is done, but its audit rows are only in the journal (the table write failed)
EXIT_AUDIT_FAILED = 3
#: ``audit --recover``: a journal has lines that are not records (its readable rows merged, the file kept)
EXIT_JOURNAL_DAMAGED = 4
