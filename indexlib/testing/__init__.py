"""Test material: segments and partitions written the way a broker writes them (``generate``).

Imports ``format``."""

from .generate import GeneratorArgumentError, generate_partition

__all__ = ["GeneratorArgumentError", "generate_partition"]
