"""The schemas of the records of KRaft's metadata log (``__cluster_metadata``) and its snapshots, transcribed from
Kafka 4.1.0's published message definitions (``metadata/src/main/resources/common/metadata/*Record.json``).

A record's value is framed (Kafka's ``AbstractApiMessageSerde``): an unsigned varint frame version (1), the
record's type (:data:`METADATA_RECORD_TYPES`) and its version, each an unsigned varint, then the record at that
version; its key is null.

Invariants: every definition equals Kafka's, field for field (``tests/indexlib/test_message_schemas.py``).
"""

from __future__ import annotations

from .message_schema import Field as F
from .message_schema import Message

RegisterBrokerRecord = Message(
    "RegisterBrokerRecord",
    (0, 3),
    0,
    (
        F("brokerId", "int32"),
        F("isMigratingZkBroker", "bool", since=2),
        F("incarnationId", "uuid"),
        F("brokerEpoch", "int64"),
        F(
            "endPoints",
            "[]",
            struct=(
                F("name", "string"),
                F("host", "string"),
                F("port", "uint16"),
                F("securityProtocol", "int16"),
            ),
        ),
        F(
            "features",
            "[]",
            struct=(
                F("name", "string"),
                F("minSupportedVersion", "int16"),
                F("maxSupportedVersion", "int16"),
            ),
        ),
        F("rack", "string", nullable_since=0),
        F("fenced", "bool", default=True),
        F("inControlledShutdown", "bool", since=1),
        F("logDirs", "[]uuid", since=3, tag=0),
    ),
)
UnregisterBrokerRecord = Message(
    "UnregisterBrokerRecord",
    (0, 0),
    0,
    (
        F("brokerId", "int32"),
        F("brokerEpoch", "int64"),
    ),
)
TopicRecord = Message(
    "TopicRecord",
    (0, 0),
    0,
    (
        F("name", "string"),
        F("topicId", "uuid"),
    ),
)
PartitionRecord = Message(
    "PartitionRecord",
    (0, 2),
    0,
    (
        F("partitionId", "int32", default=-1),
        F("topicId", "uuid"),
        F("replicas", "[]int32"),
        F("isr", "[]int32"),
        F("removingReplicas", "[]int32"),
        F("addingReplicas", "[]int32"),
        F("leader", "int32", default=-1),
        F("leaderRecoveryState", "int8", tag=0),
        F("leaderEpoch", "int32", default=-1),
        F("partitionEpoch", "int32", default=-1),
        F("directories", "[]uuid", since=1),
        F("eligibleLeaderReplicas", "[]int32", since=2, nullable_since=2, default=None, tag=1),
        F("lastKnownElr", "[]int32", since=2, nullable_since=2, default=None, tag=2),
    ),
)
ConfigRecord = Message(
    "ConfigRecord",
    (0, 0),
    0,
    (
        F("resourceType", "int8"),
        F("resourceName", "string"),
        F("name", "string"),
        F("value", "string", nullable_since=0),
    ),
)
PartitionChangeRecord = Message(
    "PartitionChangeRecord",
    (0, 2),
    0,
    (
        F("partitionId", "int32", default=-1),
        F("topicId", "uuid"),
        F("isr", "[]int32", nullable_since=0, default=None, tag=0),
        F("leader", "int32", default=-2, tag=1),
        F("replicas", "[]int32", nullable_since=0, default=None, tag=2),
        F("removingReplicas", "[]int32", nullable_since=0, default=None, tag=3),
        F("addingReplicas", "[]int32", nullable_since=0, default=None, tag=4),
        F("leaderRecoveryState", "int8", default=-1, tag=5),
        F("directories", "[]uuid", since=1, nullable_since=1, default=None, tag=8),
        F("eligibleLeaderReplicas", "[]int32", since=2, nullable_since=2, default=None, tag=6),
        F("lastKnownElr", "[]int32", since=2, nullable_since=2, default=None, tag=7),
    ),
)
FenceBrokerRecord = Message(
    "FenceBrokerRecord",
    (0, 0),
    0,
    (
        F("id", "int32"),
        F("epoch", "int64"),
    ),
)
UnfenceBrokerRecord = Message(
    "UnfenceBrokerRecord",
    (0, 0),
    0,
    (
        F("id", "int32"),
        F("epoch", "int64"),
    ),
)
RemoveTopicRecord = Message(
    "RemoveTopicRecord",
    (0, 0),
    0,
    (F("topicId", "uuid"),),
)
DelegationTokenRecord = Message(
    "DelegationTokenRecord",
    (0, 0),
    0,
    (
        F("owner", "string"),
        F("requester", "string"),
        F("renewers", "[]string"),
        F("issueTimestamp", "int64"),
        F("maxTimestamp", "int64"),
        F("expirationTimestamp", "int64"),
        F("tokenId", "string"),
    ),
)
UserScramCredentialRecord = Message(
    "UserScramCredentialRecord",
    (0, 0),
    0,
    (
        F("name", "string"),
        F("mechanism", "int8"),
        F("salt", "bytes"),
        F("storedKey", "bytes"),
        F("serverKey", "bytes"),
        F("iterations", "int32"),
    ),
)
FeatureLevelRecord = Message(
    "FeatureLevelRecord",
    (0, 0),
    0,
    (
        F("name", "string"),
        F("featureLevel", "int16"),
    ),
)
ClientQuotaRecord = Message(
    "ClientQuotaRecord",
    (0, 0),
    0,
    (
        F(
            "entity",
            "[]",
            struct=(
                F("entityType", "string"),
                F("entityName", "string", nullable_since=0),
            ),
        ),
        F("key", "string"),
        F("value", "float64"),
        F("remove", "bool"),
    ),
)
ProducerIdsRecord = Message(
    "ProducerIdsRecord",
    (0, 0),
    0,
    (
        F("brokerId", "int32"),
        F("brokerEpoch", "int64", default=-1),
        F("nextProducerId", "int64"),
    ),
)
BrokerRegistrationChangeRecord = Message(
    "BrokerRegistrationChangeRecord",
    (0, 2),
    0,
    (
        F("brokerId", "int32"),
        F("brokerEpoch", "int64"),
        F("fenced", "int8", tag=0),
        F("inControlledShutdown", "int8", since=1, tag=1),
        F("logDirs", "[]uuid", since=2, tag=2),
    ),
)
AccessControlEntryRecord = Message(
    "AccessControlEntryRecord",
    (0, 0),
    0,
    (
        F("id", "uuid"),
        F("resourceType", "int8"),
        F("resourceName", "string"),
        F("patternType", "int8"),
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permissionType", "int8"),
    ),
)
RemoveAccessControlEntryRecord = Message(
    "RemoveAccessControlEntryRecord",
    (0, 0),
    0,
    (F("id", "uuid"),),
)
NoOpRecord = Message(
    "NoOpRecord",
    (0, 0),
    0,
    (),
)
ZkMigrationStateRecord = Message(
    "ZkMigrationStateRecord",
    (0, 0),
    0,
    (F("zkMigrationState", "int8"),),
)
RemoveUserScramCredentialRecord = Message(
    "RemoveUserScramCredentialRecord",
    (0, 0),
    0,
    (
        F("name", "string"),
        F("mechanism", "int8"),
    ),
)
BeginTransactionRecord = Message(
    "BeginTransactionRecord",
    (0, 0),
    0,
    (F("name", "string", nullable_since=0, default=None, tag=0),),
)
EndTransactionRecord = Message(
    "EndTransactionRecord",
    (0, 0),
    0,
    (),
)
AbortTransactionRecord = Message(
    "AbortTransactionRecord",
    (0, 0),
    0,
    (F("reason", "string", nullable_since=0, default=None, tag=0),),
)
RemoveDelegationTokenRecord = Message(
    "RemoveDelegationTokenRecord",
    (0, 0),
    0,
    (F("tokenId", "string"),),
)
RegisterControllerRecord = Message(
    "RegisterControllerRecord",
    (0, 0),
    0,
    (
        F("controllerId", "int32"),
        F("incarnationId", "uuid"),
        F("zkMigrationReady", "bool"),
        F(
            "endPoints",
            "[]",
            struct=(
                F("name", "string"),
                F("host", "string"),
                F("port", "uint16"),
                F("securityProtocol", "int16"),
            ),
        ),
        F(
            "features",
            "[]",
            struct=(
                F("name", "string"),
                F("minSupportedVersion", "int16"),
                F("maxSupportedVersion", "int16"),
            ),
        ),
    ),
)
ClearElrRecord = Message(
    "ClearElrRecord",
    (0, 0),
    0,
    (F("topicName", "string"),),
)


#: metadata record type -> (Kafka's ``MetadataRecordType`` name, schema)
METADATA_RECORD_TYPES: dict[int, tuple[str, Message]] = {
    0: ("REGISTER_BROKER_RECORD", RegisterBrokerRecord),
    1: ("UNREGISTER_BROKER_RECORD", UnregisterBrokerRecord),
    2: ("TOPIC_RECORD", TopicRecord),
    3: ("PARTITION_RECORD", PartitionRecord),
    4: ("CONFIG_RECORD", ConfigRecord),
    5: ("PARTITION_CHANGE_RECORD", PartitionChangeRecord),
    7: ("FENCE_BROKER_RECORD", FenceBrokerRecord),
    8: ("UNFENCE_BROKER_RECORD", UnfenceBrokerRecord),
    9: ("REMOVE_TOPIC_RECORD", RemoveTopicRecord),
    10: ("DELEGATION_TOKEN_RECORD", DelegationTokenRecord),
    11: ("USER_SCRAM_CREDENTIAL_RECORD", UserScramCredentialRecord),
    12: ("FEATURE_LEVEL_RECORD", FeatureLevelRecord),
    14: ("CLIENT_QUOTA_RECORD", ClientQuotaRecord),
    15: ("PRODUCER_IDS_RECORD", ProducerIdsRecord),
    17: ("BROKER_REGISTRATION_CHANGE_RECORD", BrokerRegistrationChangeRecord),
    18: ("ACCESS_CONTROL_ENTRY_RECORD", AccessControlEntryRecord),
    19: ("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", RemoveAccessControlEntryRecord),
    20: ("NO_OP_RECORD", NoOpRecord),
    21: ("ZK_MIGRATION_STATE_RECORD", ZkMigrationStateRecord),
    22: ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", RemoveUserScramCredentialRecord),
    23: ("BEGIN_TRANSACTION_RECORD", BeginTransactionRecord),
    24: ("END_TRANSACTION_RECORD", EndTransactionRecord),
    25: ("ABORT_TRANSACTION_RECORD", AbortTransactionRecord),
    26: ("REMOVE_DELEGATION_TOKEN_RECORD", RemoveDelegationTokenRecord),
    27: ("REGISTER_CONTROLLER_RECORD", RegisterControllerRecord),
    28: ("CLEAR_ELR_RECORD", ClearElrRecord),
}
