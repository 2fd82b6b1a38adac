"""The record schemas of Kafka's coordinators, transcribed from Kafka 4.1.0's published message definitions
(``group-coordinator/.../common/message/*.json``, ``transaction-coordinator/.../TransactionLog{Key,Value}.json``
and the consumer's embedded protocol, ``clients/.../ConsumerProtocol{Subscription,Assignment}.json``): what the
keys and values of ``__consumer_offsets`` and ``__transaction_state`` hold.

A key's leading ``int16`` is its record type (:data:`GROUP_RECORD_TYPES`, :data:`TRANSACTION_RECORD_TYPES`),
read at version 0 (types 0..2 are their own version in the older scheme, which is the same bytes); a value's
leading ``int16`` is its version.

Invariants: every definition here equals Kafka's, field for field (names as Kafka's JSON converters write them,
types, versions, nullability, tags, defaults): ``tests/indexlib/test_message_schemas.py`` holds them to the
definitions inside the jars of the Kafka distribution in ``../shared``.
"""

from __future__ import annotations

from .message_schema import Field as F
from .message_schema import Message

LegacyOffsetCommitKey = Message(
    "LegacyOffsetCommitKey",
    (0, 0),
    None,
    (
        F("group", "string", until=0),
        F("topic", "string", until=0),
        F("partition", "int32", until=0),
    ),
)
LegacyOffsetCommitValue = Message(
    "LegacyOffsetCommitValue",
    (0, 0),
    None,
    (
        F("offset", "int64", until=0),
        F("metadata", "string", until=0),
        F("commitTimestamp", "int64", until=0),
    ),
)
OffsetCommitKey = Message(
    "OffsetCommitKey",
    (0, 0),
    None,
    (
        F("group", "string", until=0),
        F("topic", "string", until=0),
        F("partition", "int32", until=0),
    ),
)
OffsetCommitValue = Message(
    "OffsetCommitValue",
    (0, 4),
    4,
    (
        F("offset", "int64"),
        F("leaderEpoch", "int32", since=3, default=-1),
        F("metadata", "string"),
        F("commitTimestamp", "int64"),
        F("expireTimestamp", "int64", since=1, until=1, default=-1),
        F("topicId", "uuid", since=4, tag=0),
    ),
)
GroupMetadataKey = Message(
    "GroupMetadataKey",
    (0, 0),
    None,
    (F("group", "string", until=0),),
)
GroupMetadataValue = Message(
    "GroupMetadataValue",
    (0, 4),
    4,
    (
        F("protocolType", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable_since=0),
        F("leader", "string", nullable_since=0),
        F("currentStateTimestamp", "int64", since=2, default=-1),
        F(
            "members",
            "[]",
            struct=(
                F("memberId", "string"),
                F("groupInstanceId", "string", since=3, nullable_since=3, default=None),
                F("clientId", "string"),
                F("clientHost", "string"),
                F("rebalanceTimeout", "int32", since=1, default=-1),
                F("sessionTimeout", "int32"),
                F("subscription", "bytes"),
                F("assignment", "bytes"),
            ),
        ),
    ),
)
ConsumerGroupMetadataKey = Message(
    "ConsumerGroupMetadataKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
ConsumerGroupMetadataValue = Message(
    "ConsumerGroupMetadataValue",
    (0, 0),
    0,
    (
        F("epoch", "int32"),
        F("metadataHash", "int64", tag=0),
    ),
)
ConsumerGroupPartitionMetadataKey = Message(
    "ConsumerGroupPartitionMetadataKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
ConsumerGroupPartitionMetadataValue = Message(
    "ConsumerGroupPartitionMetadataValue",
    (0, 0),
    0,
    (
        F(
            "topics",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("topicName", "string"),
                F("numPartitions", "int32"),
                F(
                    "partitionMetadata",
                    "[]",
                    struct=(
                        F("partition", "int32"),
                        F("racks", "[]string"),
                    ),
                ),
            ),
        ),
    ),
)
ConsumerGroupMemberMetadataKey = Message(
    "ConsumerGroupMemberMetadataKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
ConsumerGroupMemberMetadataValue = Message(
    "ConsumerGroupMemberMetadataValue",
    (0, 0),
    0,
    (
        F("instanceId", "string", nullable_since=0),
        F("rackId", "string", nullable_since=0),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("subscribedTopicNames", "[]string"),
        F("subscribedTopicRegex", "string", nullable_since=0),
        F("rebalanceTimeoutMs", "int32", default=-1),
        F("serverAssignor", "string", nullable_since=0),
        F(
            "classicMemberMetadata",
            "struct",
            nullable_since=0,
            default=None,
            tag=0,
            struct=(
                F("sessionTimeoutMs", "int32"),
                F(
                    "supportedProtocols",
                    "[]",
                    struct=(
                        F("name", "string"),
                        F("metadata", "bytes"),
                    ),
                ),
            ),
        ),
    ),
)
ConsumerGroupTargetAssignmentMetadataKey = Message(
    "ConsumerGroupTargetAssignmentMetadataKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
ConsumerGroupTargetAssignmentMetadataValue = Message(
    "ConsumerGroupTargetAssignmentMetadataValue",
    (0, 0),
    0,
    (F("assignmentEpoch", "int32"),),
)
ConsumerGroupTargetAssignmentMemberKey = Message(
    "ConsumerGroupTargetAssignmentMemberKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
ConsumerGroupTargetAssignmentMemberValue = Message(
    "ConsumerGroupTargetAssignmentMemberValue",
    (0, 0),
    0,
    (
        F(
            "topicPartitions",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("partitions", "[]int32"),
            ),
        ),
    ),
)
ConsumerGroupCurrentMemberAssignmentKey = Message(
    "ConsumerGroupCurrentMemberAssignmentKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
ConsumerGroupCurrentMemberAssignmentValue = Message(
    "ConsumerGroupCurrentMemberAssignmentValue",
    (0, 0),
    0,
    (
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        F(
            "assignedPartitions",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "partitionsPendingRevocation",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("partitions", "[]int32"),
            ),
        ),
    ),
)
ShareGroupMemberMetadataKey = Message(
    "ShareGroupMemberMetadataKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
ShareGroupMemberMetadataValue = Message(
    "ShareGroupMemberMetadataValue",
    (0, 0),
    0,
    (
        F("rackId", "string", nullable_since=0),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("subscribedTopicNames", "[]string"),
    ),
)
ShareGroupMetadataKey = Message(
    "ShareGroupMetadataKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
ShareGroupMetadataValue = Message(
    "ShareGroupMetadataValue",
    (0, 0),
    0,
    (
        F("epoch", "int32"),
        F("metadataHash", "int64"),
    ),
)
ShareGroupTargetAssignmentMetadataKey = Message(
    "ShareGroupTargetAssignmentMetadataKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
ShareGroupTargetAssignmentMetadataValue = Message(
    "ShareGroupTargetAssignmentMetadataValue",
    (0, 0),
    0,
    (F("assignmentEpoch", "int32"),),
)
ShareGroupTargetAssignmentMemberKey = Message(
    "ShareGroupTargetAssignmentMemberKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
ShareGroupTargetAssignmentMemberValue = Message(
    "ShareGroupTargetAssignmentMemberValue",
    (0, 0),
    0,
    (
        F(
            "topicPartitions",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("partitions", "[]int32"),
            ),
        ),
    ),
)
ShareGroupCurrentMemberAssignmentKey = Message(
    "ShareGroupCurrentMemberAssignmentKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
ShareGroupCurrentMemberAssignmentValue = Message(
    "ShareGroupCurrentMemberAssignmentValue",
    (0, 0),
    0,
    (
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        F(
            "assignedPartitions",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("partitions", "[]int32"),
            ),
        ),
    ),
)
ShareGroupStatePartitionMetadataKey = Message(
    "ShareGroupStatePartitionMetadataKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
ShareGroupStatePartitionMetadataValue = Message(
    "ShareGroupStatePartitionMetadataValue",
    (0, 0),
    0,
    (
        F(
            "initializingTopics",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("topicName", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "initializedTopics",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("topicName", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "deletingTopics",
            "[]",
            struct=(
                F("topicId", "uuid"),
                F("topicName", "string"),
            ),
        ),
    ),
)
ConsumerGroupRegularExpressionKey = Message(
    "ConsumerGroupRegularExpressionKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("regularExpression", "string", until=0),
    ),
)
ConsumerGroupRegularExpressionValue = Message(
    "ConsumerGroupRegularExpressionValue",
    (0, 0),
    0,
    (
        F("topics", "[]string"),
        F("version", "int64"),
        F("timestamp", "int64"),
    ),
)
StreamsGroupMetadataKey = Message(
    "StreamsGroupMetadataKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
StreamsGroupMetadataValue = Message(
    "StreamsGroupMetadataValue",
    (0, 0),
    0,
    (
        F("epoch", "int32"),
        F("metadataHash", "int64"),
    ),
)
StreamsGroupMemberMetadataKey = Message(
    "StreamsGroupMemberMetadataKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
StreamsGroupMemberMetadataValue = Message(
    "StreamsGroupMemberMetadataValue",
    (0, 0),
    0,
    (
        F("instanceId", "string", nullable_since=0),
        F("rackId", "string", nullable_since=0),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("rebalanceTimeoutMs", "int32", default=-1),
        F("topologyEpoch", "int32"),
        F("processId", "string"),
        F(
            "userEndpoint",
            "struct",
            nullable_since=0,
            default=None,
            struct=(
                F("host", "string"),
                F("port", "uint16"),
            ),
        ),
        F(
            "clientTags",
            "[]",
            struct=(
                F("key", "string"),
                F("value", "string"),
            ),
        ),
    ),
)
StreamsGroupTargetAssignmentMetadataKey = Message(
    "StreamsGroupTargetAssignmentMetadataKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
StreamsGroupTargetAssignmentMetadataValue = Message(
    "StreamsGroupTargetAssignmentMetadataValue",
    (0, 0),
    0,
    (F("assignmentEpoch", "int32"),),
)
StreamsGroupTargetAssignmentMemberKey = Message(
    "StreamsGroupTargetAssignmentMemberKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
StreamsGroupTargetAssignmentMemberValue = Message(
    "StreamsGroupTargetAssignmentMemberValue",
    (0, 0),
    0,
    (
        F(
            "activeTasks",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "standbyTasks",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "warmupTasks",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
    ),
)
StreamsGroupCurrentMemberAssignmentKey = Message(
    "StreamsGroupCurrentMemberAssignmentKey",
    (0, 0),
    None,
    (
        F("groupId", "string", until=0),
        F("memberId", "string", until=0),
    ),
)
StreamsGroupCurrentMemberAssignmentValue = Message(
    "StreamsGroupCurrentMemberAssignmentValue",
    (0, 0),
    0,
    (
        F("memberEpoch", "int32"),
        F("previousMemberEpoch", "int32"),
        F("state", "int8"),
        F(
            "activeTasks",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "standbyTasks",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "warmupTasks",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "activeTasksPendingRevocation",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "standbyTasksPendingRevocation",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F(
            "warmupTasksPendingRevocation",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("partitions", "[]int32"),
            ),
        ),
    ),
)
StreamsGroupTopologyKey = Message(
    "StreamsGroupTopologyKey",
    (0, 0),
    None,
    (F("groupId", "string", until=0),),
)
StreamsGroupTopologyValue = Message(
    "StreamsGroupTopologyValue",
    (0, 0),
    0,
    (
        F("epoch", "int32"),
        F(
            "subtopologies",
            "[]",
            struct=(
                F("subtopologyId", "string"),
                F("sourceTopics", "[]string"),
                F("sourceTopicRegex", "[]string"),
                F(
                    "stateChangelogTopics",
                    "[]",
                    struct=(
                        F("name", "string"),
                        F("partitions", "int32"),
                        F("replicationFactor", "int16"),
                        F(
                            "topicConfigs",
                            "[]",
                            struct=(
                                F("key", "string"),
                                F("value", "string"),
                            ),
                        ),
                    ),
                ),
                F("repartitionSinkTopics", "[]string"),
                F(
                    "repartitionSourceTopics",
                    "[]",
                    struct=(
                        F("name", "string"),
                        F("partitions", "int32"),
                        F("replicationFactor", "int16"),
                        F(
                            "topicConfigs",
                            "[]",
                            struct=(
                                F("key", "string"),
                                F("value", "string"),
                            ),
                        ),
                    ),
                ),
                F(
                    "copartitionGroups",
                    "[]",
                    struct=(
                        F("sourceTopics", "[]int16"),
                        F("sourceTopicRegex", "[]int16"),
                        F("repartitionSourceTopics", "[]int16"),
                    ),
                ),
            ),
        ),
    ),
)
TransactionLogKey = Message(
    "TransactionLogKey",
    (0, 0),
    None,
    (F("transactionalId", "string", until=0),),
)
TransactionLogValue = Message(
    "TransactionLogValue",
    (0, 1),
    1,
    (
        F("producerId", "int64"),
        F("previousProducerId", "int64", since=1, default=-1, tag=0),
        F("nextProducerId", "int64", since=1, default=-1, tag=1),
        F("producerEpoch", "int16"),
        F("nextProducerEpoch", "int16", since=1, default=-1, tag=3),
        F("transactionTimeoutMs", "int32"),
        F("transactionStatus", "int8"),
        F(
            "transactionPartitions",
            "[]",
            nullable_since=0,
            struct=(
                F("topic", "string"),
                F("partitionIds", "[]int32"),
            ),
        ),
        F("transactionLastUpdateTimestampMs", "int64"),
        F("transactionStartTimestampMs", "int64"),
        F("clientTransactionVersion", "int16", since=1, tag=2),
    ),
)
ConsumerProtocolSubscription = Message(
    "ConsumerProtocolSubscription",
    (0, 3),
    None,
    (
        F("topics", "[]string"),
        F("userData", "bytes", nullable_since=0, default=None),
        F(
            "ownedPartitions",
            "[]",
            since=1,
            struct=(
                F("topic", "string", since=1),
                F("partitions", "[]int32", since=1),
            ),
        ),
        F("generationId", "int32", since=2, default=-1),
        F("rackId", "string", since=3, nullable_since=3, default=None),
    ),
)
ConsumerProtocolAssignment = Message(
    "ConsumerProtocolAssignment",
    (0, 3),
    None,
    (
        F(
            "assignedPartitions",
            "[]",
            struct=(
                F("topic", "string"),
                F("partitions", "[]int32"),
            ),
        ),
        F("userData", "bytes", nullable_since=0, default=None),
    ),
)


#: ``__consumer_offsets`` key record type -> (key schema, value schema); 9 and 18 are types Kafka 4.1.0 no longer has
GROUP_RECORD_TYPES: dict[int, tuple[Message, Message]] = {
    0: (LegacyOffsetCommitKey, LegacyOffsetCommitValue),
    1: (OffsetCommitKey, OffsetCommitValue),
    2: (GroupMetadataKey, GroupMetadataValue),
    3: (ConsumerGroupMetadataKey, ConsumerGroupMetadataValue),
    4: (ConsumerGroupPartitionMetadataKey, ConsumerGroupPartitionMetadataValue),
    5: (ConsumerGroupMemberMetadataKey, ConsumerGroupMemberMetadataValue),
    6: (ConsumerGroupTargetAssignmentMetadataKey, ConsumerGroupTargetAssignmentMetadataValue),
    7: (ConsumerGroupTargetAssignmentMemberKey, ConsumerGroupTargetAssignmentMemberValue),
    8: (ConsumerGroupCurrentMemberAssignmentKey, ConsumerGroupCurrentMemberAssignmentValue),
    10: (ShareGroupMemberMetadataKey, ShareGroupMemberMetadataValue),
    11: (ShareGroupMetadataKey, ShareGroupMetadataValue),
    12: (ShareGroupTargetAssignmentMetadataKey, ShareGroupTargetAssignmentMetadataValue),
    13: (ShareGroupTargetAssignmentMemberKey, ShareGroupTargetAssignmentMemberValue),
    14: (ShareGroupCurrentMemberAssignmentKey, ShareGroupCurrentMemberAssignmentValue),
    15: (ShareGroupStatePartitionMetadataKey, ShareGroupStatePartitionMetadataValue),
    16: (ConsumerGroupRegularExpressionKey, ConsumerGroupRegularExpressionValue),
    17: (StreamsGroupMetadataKey, StreamsGroupMetadataValue),
    19: (StreamsGroupMemberMetadataKey, StreamsGroupMemberMetadataValue),
    20: (StreamsGroupTargetAssignmentMetadataKey, StreamsGroupTargetAssignmentMetadataValue),
    21: (StreamsGroupTargetAssignmentMemberKey, StreamsGroupTargetAssignmentMemberValue),
    22: (StreamsGroupCurrentMemberAssignmentKey, StreamsGroupCurrentMemberAssignmentValue),
    23: (StreamsGroupTopologyKey, StreamsGroupTopologyValue),
}
#: ``__transaction_state`` key record type -> (key schema, value schema)
TRANSACTION_RECORD_TYPES: dict[int, tuple[Message, Message]] = {0: (TransactionLogKey, TransactionLogValue)}
