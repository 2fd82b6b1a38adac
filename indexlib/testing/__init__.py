"""Test material: segments and partitions written the way a broker writes them (``generate``).

Imports ``format``."""

from .generate import generate_partition

__all__ = ["generate_partition"]
