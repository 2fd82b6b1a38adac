"""What every ``kafka-index`` subcommand shares: the program's name, the usage error and the exit codes
beyond 0, 1 and 2 (see :mod:`jobs.cli`)."""

from __future__ import annotations

PROG = "kafka-index"


class UsageError(Exception):
    """Bad usage or bad input: one message, exit code 2."""


#: the work is done, but its audit rows are only in the journal (the table write failed)
EXIT_AUDIT_FAILED = 3
#: ``audit --recover``: a journal has lines that are not records (its readable rows merged, the file kept)
EXIT_JOURNAL_DAMAGED = 4
