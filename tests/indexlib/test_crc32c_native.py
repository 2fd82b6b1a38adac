"""The compiled kernel's CRC code (``indexlib/format/_crc32c.h``) as a standalone C program (``crc32c_check.c``):
every path (the CPU's instruction in one and three streams, the table, the table's three-stream combination,
CRC32 of legacy entries) against the ``crc32c`` package and ``zlib``, and the self-test that keeps a wrong
hardware path off. Natively always (where a C compiler exists, as the kernel needs one); for aarch64 and for an
x86-64 CPU without SSE4.2 where a cross compiler and QEMU's user-mode emulator are installed (Debian:
``apt-get install gcc-aarch64-linux-gnu qemu-user``): the only way these paths run on this project's machines.
"""

from __future__ import annotations

import platform
import random
import shutil
import subprocess
import sysconfig
import zlib
from pathlib import Path

import crc32c
import pytest

HERE = Path(__file__).resolve().parent
INDEXLIB = HERE.parent.parent / "indexlib" / "format"
SOURCE = HERE / "crc32c_check.c"
FLAGS = ["-O3", "-std=c11", "-Wall", "-Wextra", "-Werror", f"-I{INDEXLIB}"]
# every block edge of the one- and three-stream paths (48-byte small blocks, 1024-byte blocks), and around them
SMALL, BIG = 48, 1024
EDGES = [0, 1, 3, 4, 7, 8, 9, 149, 3 * SMALL, 6 * SMALL, 3 * BIG, 3 * BIG + 3 * SMALL, 16384 - 21, 65536]
LENGTHS = sorted({max(0, min(65536, e + d)) for e in EDGES for d in range(-9, 10)})
QEMU_HINT = "apt-get install gcc-aarch64-linux-gnu qemu-user"
# the header's fault switch: its one-stream hardware path wrong for a 170-byte batch's 149 checked bytes
FAULT = "-DCRC32C_FAULT_AT_LENGTH=149"


def native_compiler() -> str | None:
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    return shutil.which(cc) or shutil.which("cc") or shutil.which("gcc")


def build(compiler: str, out: Path, *extra: str) -> Path:
    subprocess.run([compiler, *FLAGS, *extra, str(SOURCE), "-o", str(out)], check=True, capture_output=True)
    return out


def run(command: list[str], data: bytes) -> tuple[bool, dict[int, list[int]], list[bool]]:
    """(hardware on, {length: [crc32c, crc32c_fast, table, table3, ieee]}, [each broken function rejected])."""
    proc = subprocess.run([*command, *map(str, LENGTHS)], input=data, capture_output=True, check=True)
    lines = proc.stdout.decode().splitlines()
    assert lines[0].startswith("hardware ")
    values = {int(w[0]): [int(x, 16) for x in w[1:]] for w in (line.split() for line in lines[1:]) if w[0].isdigit()}
    rejects = [line == "rejects 1" for line in lines if line.startswith("rejects ")]
    return lines[0] == "hardware 1", values, rejects


def check(command: list[str], expect_hardware: bool | None) -> None:
    data = random.Random(11).randbytes(65536)
    hardware, values, rejects = run(command, data)
    if expect_hardware is not None:
        assert hardware == expect_hardware
    assert sorted(values) == LENGTHS
    for n, (one, fast, table, table3, ieee) in values.items():
        want = crc32c.crc32c(data[:n])
        assert (one, fast, table, table3) == (want, want, want, want), f"length {n}"
        assert ieee == zlib.crc32(data[:n]), f"length {n}"
    assert rejects == [True, True, True], "the self-test accepted a function wrong at one length"


@pytest.fixture(scope="module")
def compiler() -> str:
    found = native_compiler()
    if found is None:
        pytest.skip("no C compiler (the compiled kernel needs one too)")
    return found


@pytest.fixture(scope="module")
def native(compiler, tmp_path_factory) -> Path:
    return build(compiler, tmp_path_factory.mktemp("crc") / "crc32c_check")


def cpu_has_sse42() -> bool | None:
    """Whether this x86-64 Linux CPU has SSE4.2 (None: not known here)."""
    cpuinfo = Path("/proc/cpuinfo")
    if platform.machine() != "x86_64" or not cpuinfo.exists():
        return None
    return "sse4_2" in cpuinfo.read_text()


def test_every_crc_path_matches_the_reference_here(native):
    check([str(native)], cpu_has_sse42())


def test_a_wrong_hardware_path_is_left_off_here(compiler, tmp_path):
    if not cpu_has_sse42():
        pytest.skip("needs an x86-64 Linux CPU with SSE4.2 (its hardware path is the one made wrong)")
    check([str(build(compiler, tmp_path / "crc32c_check_fault", FAULT))], expect_hardware=False)


def test_the_kernel_uses_the_hardware_path_the_check_program_chose(native):
    kernel = pytest.importorskip(
        "indexlib.format._kernel", reason="the C extension is not built (no compiler at install)"
    )
    hardware, _, _ = run([str(native)], bytes(65536))
    assert kernel.hardware() == hardware


def tool(name: str) -> str:
    """The path of a cross compiler or emulator, or a skip that says how to install it."""
    found = shutil.which(name) or shutil.which(name + "-static")
    if found is None:
        pytest.skip(f"needs {name} to run this path emulated ({QEMU_HINT})")
    return found


@pytest.mark.parametrize("fault", [False, True], ids=["as built", "hardware path made wrong"])
def test_aarch64_crc_extension_path_emulated(tmp_path, fault):
    compiler, qemu = tool("aarch64-linux-gnu-gcc"), tool("qemu-aarch64")
    exe = build(compiler, tmp_path / "crc32c_check_aarch64", "-static", *([FAULT] if fault else []))
    check([qemu, "-cpu", "max", str(exe)], expect_hardware=not fault)


@pytest.mark.skipif(platform.machine() != "x86_64", reason="the x86-64 table path is emulated on x86-64 hosts only")
def test_x86_64_without_sse42_uses_the_table_emulated(compiler, tmp_path):
    qemu = tool("qemu-x86_64")
    # the baseline x86-64 instruction set: a compiler defaulting to x86-64-v2 would emit SSE4 for plain code
    exe = build(compiler, tmp_path / "crc32c_check_baseline", "-march=x86-64")
    check([qemu, "-cpu", "qemu64", str(exe)], expect_hardware=False)
