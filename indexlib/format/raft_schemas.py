"""The schemas of the control records KRaft writes into ``__cluster_metadata`` and its snapshots (a control
batch's record key is a version and a type: 2 ``LeaderChange``, 3 ``SnapshotHeader``, 4 ``SnapshotFooter``,
5 ``KRaftVersion``, 6 ``KRaftVoters``), transcribed from Kafka 4.1.0's published message definitions
(``clients/.../common/message/{LeaderChangeMessage,SnapshotHeaderRecord,SnapshotFooterRecord,KRaftVersionRecord,
VotersRecord}.json``).

Each value begins with its own ``version`` field; Kafka reads every one at version 0 (``ControlRecordUtils``) and
prints it at the version the value names.

Invariants: every definition equals Kafka's field for field (``tests/indexlib/test_message_schemas.py``).
"""

from __future__ import annotations

from .message_schema import Field as F
from .message_schema import Message

LeaderChangeMessage = Message(
    "LeaderChangeMessage",
    (0, 1),
    0,
    (
        F("version", "int16"),
        F("leaderId", "int32"),
        F(
            "voters",
            "[]",
            struct=(
                F("voterId", "int32"),
                F("voterDirectoryId", "uuid", since=1),
            ),
        ),
        F(
            "grantingVoters",
            "[]",
            struct=(
                F("voterId", "int32"),
                F("voterDirectoryId", "uuid", since=1),
            ),
        ),
    ),
)
SnapshotHeaderRecord = Message(
    "SnapshotHeaderRecord",
    (0, 0),
    0,
    (
        F("version", "int16"),
        F("lastContainedLogTimestamp", "int64"),
    ),
)
SnapshotFooterRecord = Message(
    "SnapshotFooterRecord",
    (0, 0),
    0,
    (F("version", "int16"),),
)
KRaftVersionRecord = Message(
    "KRaftVersionRecord",
    (0, 0),
    0,
    (
        F("version", "int16"),
        F("kRaftVersion", "int16"),
    ),
)
VotersRecord = Message(
    "VotersRecord",
    (0, 0),
    0,
    (
        F("version", "int16"),
        F(
            "voters",
            "[]",
            struct=(
                F("voterId", "int32"),
                F("voterDirectoryId", "uuid"),
                F(
                    "endpoints",
                    "[]",
                    struct=(
                        F("name", "string"),
                        F("host", "string"),
                        F("port", "uint16"),
                    ),
                ),
                F(
                    "kRaftVersionFeature",
                    "struct",
                    struct=(
                        F("minSupportedVersion", "int16"),
                        F("maxSupportedVersion", "int16"),
                    ),
                ),
            ),
        ),
    ),
)


#: control record type -> (the name kafka-dump-log.sh prints before the record's JSON, its schema)
KRAFT_CONTROL_RECORDS: dict[int, tuple[str, Message]] = {
    2: ("LeaderChange:", LeaderChangeMessage),
    3: ("SnapshotHeader", SnapshotHeaderRecord),
    4: ("SnapshotFooter", SnapshotFooterRecord),
    5: ("KRaftVersion", KRaftVersionRecord),
    6: ("KRaftVoters", VotersRecord),
}
