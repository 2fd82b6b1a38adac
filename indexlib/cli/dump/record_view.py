"""The record rows of ``--deep-iteration`` (and ``--print-data-log``, the decoders): one dict per record of a
batch, as ``kafka-dump-log.sh`` shows it, decoded by :mod:`indexlib.format.record_decoding`.

Invariants: a batch's records are shown whole or not at all (``None``, with the reason returned); keys, values
and header values are shown only with ``print_data_log``, as ``payload_format`` says (text: UTF-8 with
replacement characters, hex, base64; ``None`` for a null); a decoder reads non-control batches only.
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Any

from ...format.compression import CodecUnavailableError
from ...format.coordinator_records import decode_offsets_record, decode_transaction_log_record
from ...format.errors import InvalidRecordError
from ...format.record_decoding import Record, batch_records
from ...format.records import MARKER_ABORT, MARKER_COMMIT
from .model import DumpOptions

Decoder = Callable[[bytes | None, bytes | None, int], tuple[str, str | None]]
DECODERS: dict[str, Decoder] = {"offsets": decode_offsets_record, "transaction-log": decode_transaction_log_record}


def show_payload(data: bytes | None, payload_format: str) -> str | None:
    """``data`` as ``payload_format`` shows it (``None`` stays ``None``)."""
    if data is None:
        return None
    if payload_format == "hex":
        return data.hex()
    if payload_format == "base64":
        return base64.b64encode(data).decode("ascii")
    return data.decode("utf-8", errors="replace")


def record_rows(
    batch: bytes, is_control: bool, options: DumpOptions
) -> tuple[list[dict[str, Any]] | None, CodecUnavailableError | InvalidRecordError | None]:
    """The rows of one whole batch's records, or ``None`` and why they cannot be read."""
    try:
        records = batch_records(batch)
    except (CodecUnavailableError, InvalidRecordError) as exc:
        return None, exc
    v2 = batch[16] >= 2
    return [_record_row(r, v2, is_control, options) for r in records], None


def _record_row(r: Record, v2: bool, is_control: bool, options: DumpOptions) -> dict[str, Any]:
    row: dict[str, Any] = {
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key_size": -1 if r.key is None else len(r.key),
        "value_size": -1 if r.value is None else len(r.value),
    }
    if v2:
        row["sequence"] = r.sequence
        row["header_keys"] = [h.key for h in r.headers]
    if is_control:
        row.update(_control(r))
    elif options.decoder is not None:
        row["key"], value = DECODERS[options.decoder](r.key, r.value, r.offset)
        if value is not None:  # a record the decoder skipped has only its key (the reason), as in Kafka's dump
            row["value"] = value
    elif options.print_data_log:
        fmt = options.payload_format
        row["key"] = show_payload(r.key, fmt)
        row["value"] = show_payload(r.value, fmt)
        if v2:
            row["headers"] = [{"key": h.key, "value": show_payload(h.value, fmt)} for h in r.headers]
    return row


def _control(r: Record) -> dict[str, Any]:
    """A control record's type and, for a transaction marker, its coordinator epoch (Kafka's dump line)."""
    if r.key is None or len(r.key) < 4:
        return {"control_type": None}
    control_type = struct.unpack_from(">h", r.key, 2)[0]
    if control_type not in (MARKER_ABORT, MARKER_COMMIT):
        return {"control_type": control_type}
    epoch = struct.unpack_from(">i", r.value, 2)[0] if r.value is not None and len(r.value) >= 6 else None
    return {"marker": "ABORT" if control_type == MARKER_ABORT else "COMMIT", "coordinator_epoch": epoch}


def format_record(row: dict[str, Any], timestamp_type: str) -> str:
    """A record row as ``kafka-dump-log.sh --deep-iteration`` prints it (``| offset: ...``)."""
    line = (
        f"| offset: {row['offset']} {timestamp_type}: {row['timestamp']} keySize: {row['key_size']} "
        f"valueSize: {row['value_size']}"
    )
    if "sequence" in row:
        line += f" sequence: {row['sequence']} headerKeys: [{','.join(row['header_keys'])}]"
    if "marker" in row:
        line += f" endTxnMarker: {row['marker']} coordinatorEpoch: {row['coordinator_epoch']}"
    elif "control_type" in row:
        line += f" controlType: {row['control_type']}"
    if "key" in row:
        line += f" key: {_text(row['key'])}"
    if "value" in row:
        line += f" payload: {_text(row['value'])}"
    return line


def _text(value: str | None) -> str:
    return "null" if value is None else value
