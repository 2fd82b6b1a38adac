"""Test material: segments and partitions written the way a broker writes them (``generate``).

Imports ``format``."""
