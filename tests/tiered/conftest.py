"""The tiered-storage fixtures: a real Kafka 4.1.0 broker tiering through the project's test RSM, once per pytest
session and layout (about 40 s each on two cores). Tests only read what these leave; a test that damages objects
works on its own copy."""

from __future__ import annotations

import pytest

from ..conftest import S3_BUCKET
from .tiered_broker import TieredRun, compile_rsm, rsm_missing, tier

#: where the Aiven-layout broker writes in the session's bucket
AIVEN_PREFIX = "tiered/"


@pytest.fixture(scope="session")
def rsm_jar(tmp_path_factory):
    if why := rsm_missing():
        pytest.skip(why)
    return compile_rsm(tmp_path_factory.mktemp("rsm"))


@pytest.fixture(scope="session")
def tiered_kafka(tmp_path_factory, rsm_jar) -> TieredRun:
    """A stopped broker whose closed segments were tiered in Kafka's own layout to a local dir."""
    return tier(tmp_path_factory.mktemp("tiered-kafka"), "kafka", rsm_jar)


@pytest.fixture(scope="session")
def tiered_aiven(tmp_path_factory, rsm_jar, s3) -> TieredRun:
    """A stopped broker whose closed segments were tiered in Aiven's layout (256 KiB chunks, each zstd-compressed;
    Aiven's custom metadata) to moto's S3, under :data:`AIVEN_PREFIX` of the session's bucket."""
    options, _ = s3
    endpoint = options["AWS_ENDPOINT_URL"]
    return tier(
        tmp_path_factory.mktemp("tiered-aiven"), "aiven", rsm_jar, s3=(endpoint, S3_BUCKET), prefix=AIVEN_PREFIX
    )


def copy_prefix(client, source: str, target: str) -> list[str]:  # type: ignore[no-untyped-def]
    """Every object under ``source`` of the session's bucket copied under ``target`` (a test's own copy to
    damage); the source keys."""
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=S3_BUCKET, Prefix=source)["Contents"]]
    for key in keys:
        client.copy_object(Bucket=S3_BUCKET, Key=target + key[len(source) :], CopySource=f"{S3_BUCKET}/{key}")
    return keys
