"""Where the engine's files are found and written: log dirs and partitions (``discovery``), staging, backups,
locks and atomic publishing (``publish``).

Imports ``format`` and ``recovery``."""
