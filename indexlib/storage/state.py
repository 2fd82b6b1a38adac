"""Where the tool keeps what it writes by default, outside every broker's data."""

from __future__ import annotations

import os


def state_dir() -> str:
    """Where the tool keeps what it writes by default (a repair's and a recover's backups; the jobs' audit table
    and journal): ``$KAFKA_INDEX_HOME``, else ``$XDG_STATE_HOME/kafka-index-rebuild``, else
    ``~/.local/state/kafka-index-rebuild``. Never the working directory, which may be a broker's log dir (a dir
    there that is not a partition stops the broker)."""
    if home := os.environ.get("KAFKA_INDEX_HOME"):
        return os.path.abspath(home)
    xdg = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(os.path.abspath(xdg), "kafka-index-rebuild")
