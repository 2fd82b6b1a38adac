"""Test material: segments and partitions written the way a broker writes them (``generate``), from single
batches (``batch_encoder``).

Imports ``format``."""

from .batch_encoder import GeneratorArgumentError
from .generate import generate_partition

__all__ = ["GeneratorArgumentError", "generate_partition"]
