"""The one engine every command runs: a run over discovered partitions (``run``: plan, map each segment,
replay each partition, commit), the partition-level calls of it (``partition``), and how a run stops on a
signal (``interrupts``).

Imports ``format``, ``recovery`` and ``storage``."""
