"""Decompression of a batch's records: gzip (stdlib), and snappy, lz4 and zstd through the optional
``decompress`` extra (``pip install 'kafka-index-rebuild[decompress]'``: python-snappy, lz4, zstandard, the
libraries kafka-python uses).

Framing as Kafka's Java client writes and reads it:

* gzip: one or more gzip members;
* snappy: xerial's block framing (``\\x82SNAPPY\\x00`` + version + compat, then ``int32 length`` + raw snappy
  block, repeated); a payload without that header is one raw snappy block;
* lz4: the LZ4 frame format; for magic 0 Kafka wrote the frame descriptor's header checksum over the wrong
  bytes (KAFKA-3160) and reads it without checking, so for magic 0 the checksum byte is replaced by the right one
  before the frame is decoded;
* zstd: one or more zstd frames, their content size not required.

Invariants: the optional libraries are imported only when a batch of their codec is decompressed, so indexlib
imports and runs without them; a missing one is :class:`CodecUnavailableError` naming the package to install;
bytes that are not valid for their codec are :class:`~.errors.InvalidRecordError`. The scan kernel never
calls this module: only the dump and marker reading of a compressed control batch do.
"""

from __future__ import annotations

import importlib
import struct
import zlib
from types import ModuleType

from .errors import InvalidRecordError, KafkaIndexError

#: codec id -> (name, the module to import, the package that provides it); gzip needs only the stdlib
CODECS = {
    1: ("gzip", None, None),
    2: ("snappy", "snappy", "python-snappy"),
    3: ("lz4", "lz4.frame", "lz4"),
    4: ("zstd", "zstandard", "zstandard"),
}
EXTRA_HINT = "pip install 'kafka-index-rebuild[decompress]'"

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_LZ4_MAGIC = b"\x04\x22\x4d\x18"


class CodecUnavailableError(KafkaIndexError, ImportError):
    """A batch's codec needs a package that is not installed; ``package`` names it."""

    def __init__(self, message: str, package: str = "") -> None:
        super().__init__(message)
        self.package = package


def _unavailable(codec: str, package: str) -> CodecUnavailableError:
    return CodecUnavailableError(f"{codec} batches need the {package} package ({EXTRA_HINT})", package)


def codec_module(codec: int) -> ModuleType | None:
    """The module that decompresses ``codec`` (``None`` for gzip, which needs only the stdlib);
    :class:`CodecUnavailableError` when it is not installed, :class:`InvalidRecordError` for an unknown codec."""
    if codec not in CODECS:
        raise InvalidRecordError(f"unknown compression codec {codec}")
    name, module, package = CODECS[codec]
    if module is None or package is None:
        return None
    try:
        return importlib.import_module(module)
    except ImportError:
        raise _unavailable(name, package) from None


def decompress(codec: int, data: bytes | memoryview, magic: int = 2) -> bytes:
    """The records of a batch compressed with ``codec`` (1 gzip, 2 snappy, 3 lz4, 4 zstd); see the module
    docstring for each codec's framing and for ``magic`` (lz4 of magic 0)."""
    module = codec_module(codec)
    payload = bytes(data)
    try:
        if codec == 1:
            return _gunzip(payload)
        assert module is not None
        if codec == 2:
            return _unsnappy(module, payload)
        if codec == 3:
            return bytes(module.decompress(_fix_lz4_header_checksum(payload) if magic == 0 else payload))
        return _unzstd(module, payload)
    except (CodecUnavailableError, InvalidRecordError):
        raise
    except Exception as exc:  # each library has its own error classes; all mean "not valid for this codec"
        raise InvalidRecordError(f"cannot decompress {CODECS[codec][0]} data: {exc}") from None


def _gunzip(payload: bytes) -> bytes:
    out = []
    while payload:
        d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        out.append(d.decompress(payload))
        if not d.eof:
            raise InvalidRecordError("gzip data ends before its member does")
        payload = d.unused_data
    return b"".join(out)


def _unsnappy(snappy: ModuleType, payload: bytes) -> bytes:
    if not payload.startswith(_XERIAL_MAGIC) or len(payload) < 16:
        return bytes(snappy.decompress(payload))
    out, pos = [], 16  # magic (8), version (4), compatible version (4): not checked, as Kafka's reader
    while pos < len(payload):
        if pos + 4 > len(payload):
            raise InvalidRecordError("xerial snappy block length runs past the end")
        (size,) = struct.unpack_from(">i", payload, pos)
        pos += 4
        if size < 0 or pos + size > len(payload):
            raise InvalidRecordError(f"xerial snappy block of {size} bytes runs past the end")
        out.append(snappy.decompress(payload[pos : pos + size]))
        pos += size
    return b"".join(out)


def _unzstd(zstandard: ModuleType, payload: bytes) -> bytes:
    reader = zstandard.ZstdDecompressor().stream_reader(payload, read_across_frames=True)
    with reader:
        return bytes(reader.read())


def _fix_lz4_header_checksum(payload: bytes) -> bytes:
    """An lz4 frame whose header checksum byte is recomputed (magic-0 frames carry KAFKA-3160's wrong one)."""
    if len(payload) < 7 or payload[:4] != _LZ4_MAGIC:
        return payload
    descriptor_end = 6 + (8 if payload[4] & 0x08 else 0) + (4 if payload[4] & 0x01 else 0)
    if len(payload) <= descriptor_end:
        return payload
    checksum = (xxh32(payload[4:descriptor_end]) >> 8) & 0xFF
    return payload[:descriptor_end] + bytes([checksum]) + payload[descriptor_end + 1 :]


_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFF_FFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of ``data`` (the LZ4 frame format's checksum), from the xxHash specification; for short inputs."""
    n, pos = len(data), 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                (lane,) = struct.unpack_from("<I", data, pos + 4 * i)
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
            pos += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while pos + 4 <= n:
        (word,) = struct.unpack_from("<I", data, pos)
        h = (_rotl((h + word * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    while pos < n:
        h = (_rotl((h + data[pos] * _P5) & _M32, 11) * _P1) & _M32
        pos += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    return h ^ (h >> 16)
