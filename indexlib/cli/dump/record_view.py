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
from ...format.message_schema import compact_json
from ...format.metadata_records import decode_metadata_record
from ...format.raft_schemas import KRAFT_CONTROL_RECORDS
from ...format.record_decoding import Record, batch_records
from ...format.record_fields import FieldReader, java_string
from ...format.records import MARKER_ABORT, MARKER_COMMIT
from ...format.remote_log_metadata import decode_remote_log_metadata
from .model import DumpOptions

Decoder = Callable[[bytes | None, bytes | None, int], tuple[str | None, str | None]]
DECODERS: dict[str, Decoder] = {
    "offsets": decode_offsets_record,
    "transaction-log": decode_transaction_log_record,
    "cluster-metadata": decode_metadata_record,
    "remote-log-metadata": decode_remote_log_metadata,
}


def show_payload(data: bytes | None, payload_format: str) -> str | None:
    """``data`` as ``payload_format`` shows it (``None`` stays ``None``)."""
    if data is None:
        return None
    if payload_format == "hex":
        return data.hex()
    if payload_format == "base64":
        return base64.b64encode(data).decode("ascii")
    return java_string(data)


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
        key, value = DECODERS[options.decoder](r.key, r.value, r.offset)
        if key is not None:
            row["key"] = key
        if value is not None:  # a record the decoder skipped has only its key (the reason), as in Kafka's dump
            row["value"] = value
    elif options.print_data_log:
        fmt = options.payload_format
        row["key"] = show_payload(r.key, fmt)
        row["value"] = show_payload(r.value, fmt)
        if v2:
            row["headers"] = [{"key": h.key, "value": show_payload(h.value, fmt)} for h in r.headers]
    return row


#: Kafka's ``ControlRecordType`` names, by type id (what ``controlType: NAME(id)`` prints; any other id is UNKNOWN)
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


def _control(r: Record) -> dict[str, Any]:
    """A control record as Kafka's dump shows it: a transaction marker's type and coordinator epoch; a KRaft
    record (:data:`~indexlib.format.raft_schemas.KRAFT_CONTROL_RECORDS`) as its name and JSON; else its type."""
    if r.key is None or len(r.key) < 4:
        return {"control_type": None}
    control_type = struct.unpack_from(">h", r.key, 2)[0]
    if control_type in (MARKER_ABORT, MARKER_COMMIT):
        epoch = struct.unpack_from(">i", r.value, 2)[0] if r.value is not None and len(r.value) >= 6 else None
        return {"marker": "ABORT" if control_type == MARKER_ABORT else "COMMIT", "coordinator_epoch": epoch}
    if control_type in KRAFT_CONTROL_RECORDS and r.value is not None:
        title, schema = KRAFT_CONTROL_RECORDS[control_type]
        try:  # read at version 0, printed at the version its own "version" field names, as Kafka does
            data = schema.read(FieldReader(r.value), 0, exact=False)
            return {"control_record": title, "control_data": schema.to_json(data, data["version"])}
        except InvalidRecordError as exc:
            return {"control_type": control_type, "control_error": str(exc)}
    return {"control_type": control_type}


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
    elif "control_record" in row:
        line += f" {row['control_record']} {compact_json(row['control_data'])}"
    elif "control_type" in row:
        t = row["control_type"]  # None: a key too short to hold a type (Kafka's dump fails there)
        line += (
            " controlType: unreadable" if t is None else f" controlType: {CONTROL_TYPE_NAMES.get(t, 'UNKNOWN')}({t})"
        )
    if row.get("key") is not None:  # Kafka's dump prints a key and a payload only when the record has them
        line += f" key: {row['key']}"
    if row.get("value") is not None:
        line += f" payload: {row['value']}"
    return line
