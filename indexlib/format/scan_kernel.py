"""Which scan runs: the compiled kernel (``indexlib.format._kernel``) or the pure-Python reference.

Invariants: :data:`KERNEL` is the compiled module or ``None`` and is decided once, at import
(``KAFKA_INDEX_PURE_PYTHON=1`` asks for the pure-Python scan); :func:`compiled_kernel` is the built module
whatever that says; both scans give the same result. :data:`READ_AHEAD` may be turned off at run time (a pool
worker does), so readers look it up on this module when they scan, never copy it at import.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing_extensions import Buffer  # collections.abc.Buffer from Python 3.12 on

_compiled: ModuleType | None
try:
    import indexlib.format._kernel as _compiled
except ImportError as exc:  # pragma: no cover - built without a C compiler, or its CRC self-test failed
    _compiled = None
    import warnings

    warnings.warn(
        f"indexlib: the compiled scan kernel (indexlib.format._kernel) cannot be loaded ({exc}), so segments are scanned "
        "in pure Python, several times slower; reinstall with a C compiler (gcc or clang) present",
        RuntimeWarning,
        stacklevel=2,
    )
#: the compiled fast path, unless the pure-Python one is asked for (the reference, and the fallback)
KERNEL = None if os.environ.get("KAFKA_INDEX_PURE_PYTHON") else _compiled
#: the compiled scan reads a file longer than two megabytes one megabyte ahead on a thread of its own, unless
#: ``KAFKA_INDEX_READ_AHEAD=0``
READ_AHEAD = os.environ.get("KAFKA_INDEX_READ_AHEAD", "1") != "0"


def compiled_kernel() -> ModuleType | None:
    """The compiled kernel if it is built, whatever ``KAFKA_INDEX_PURE_PYTHON`` says (tests compare both)."""
    return _compiled


def kernel_for(compiled: bool | None) -> ModuleType | None:
    """The kernel a scan asked for with ``compiled`` uses: :data:`KERNEL` by default (``None``), else the
    compiled one (``True``, when it is built) or none (``False``: the pure-Python scan)."""
    return KERNEL if compiled is None else (_compiled if compiled else None)


def crc32c_function(compiled: bool | None = None) -> Callable[[Buffer], int]:
    """CRC-32C of a buffer: the compiled kernel's (the CPU's instruction) when the kernel is in use (or
    ``compiled``), else the ``crc32c`` package's, imported only then (its import costs ~30 ms of every
    process's start)."""
    kernel = kernel_for(compiled)
    if kernel is not None:
        function: Callable[[Buffer], int] = kernel.crc32c
        return function
    import crc32c

    if not crc32c.hardware_based:  # pragma: no cover - depends on the CPU
        import warnings

        warnings.warn(
            "crc32c is running in software mode: CRC-32C checks will be an order of magnitude slower",
            RuntimeWarning,
            stacklevel=2,
        )
    return crc32c.crc32c
