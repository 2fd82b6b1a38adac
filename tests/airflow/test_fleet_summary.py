"""The fleet's summary judges every finding a broker's run row holds (issue 37): a broker whose only finding is a
partition's (a corrupt producer snapshot) or a log dir's fails the run, as one with a damaged segment does. The
records are what ``kafka-index audit --run ID --json`` prints (``jobs.audit_queries.run_summary``); the DAG run
end to end is tests/airflow/test_fleet.py's."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent / "airflow_dags"))

from kafka_index_fleet_common import judge, parse_inventory  # noqa: E402

BROKERS = [{"id": 1, "host": "127.0.0.11"}, {"id": 2, "host": "127.0.0.12"}, {"id": 3, "host": "127.0.0.13"}]


def record(broker: int, kinds: list[str], with_findings: int, findings: dict[str, int], exit_code: int) -> dict:
    return {"cluster_id": "c", "broker_id": broker, "segments": 4, "with_findings": with_findings,
            "finding_kinds": kinds, "findings": findings, "status": "findings" if kinds else "ok",
            "exit_code": exit_code}  # fmt: skip


def test_a_broker_with_only_a_partition_finding_fails_the_summary_naming_it():
    records = [
        record(1, ["index_missing"], 1, {"index_missing": 1}, 1),
        record(2, ["bad_producer_snapshot"], 0, {}, 1),  # no segment row has a finding
        record(3, [], 0, {}, 0),
    ]
    lines, problems = judge(BROKERS, records, fail_on_findings=True)
    row = next(line for line in lines if line.split()[0] == "2")
    assert row.split()[2:5] == ["4", "1", "1"] and row.endswith("bad_producer_snapshot"), row
    (problem,) = problems
    assert "broker 1 (index_missing 1)" in problem and "broker 2 (bad_producer_snapshot)" in problem
    assert "broker 3" not in problem
    _, quiet = judge(BROKERS, records, fail_on_findings=False)
    assert quiet == []


def test_segment_and_partition_kinds_together_are_counted_once_each():
    records = [record(1, ["bad_producer_snapshot", "index_missing"], 2, {"index_missing": 2}, 1)]
    lines, _ = judge(BROKERS[:1], records, fail_on_findings=True)
    assert lines[1].split()[3] == "3" and lines[1].endswith("index_missing 2, bad_producer_snapshot"), lines


def inventory_error(text: str) -> str:
    try:
        parse_inventory(text, "brokers.yaml")
    except ValueError as exc:
        return str(exc)
    raise AssertionError("accepted")


def test_an_inventory_refuses_ids_beyond_a_java_int_extra_keys_and_aliases_each_in_one_short_line():
    """Issue 37: a broker id Kafka cannot have (2^31, 2^63) is refused here, not by each broker at run time; a key
    beside ``brokers:`` is named; YAML aliases (430 bytes of them once gave a 226 MB message) are refused before
    they are expanded, and every message stays a line of a bounded length."""
    one = "  host: 127.0.0.11\n  log_dirs: [/d]\n"
    for big in (2**31, 2**63):
        assert inventory_error(f"brokers:\n- id: {big}\n{one}") == (
            f"brokers.yaml: broker #1 (id {big}): id must be a broker id (an integer from 0 to 2147483647), got {big}"
        )
    assert parse_inventory(f"brokers:\n- id: {2**31 - 1}\n{one}", "brokers.yaml")[0]["id"] == 2**31 - 1
    assert inventory_error(f"brokers:\n- id: 1\n{one}cluster: x\n") == (
        "brokers.yaml: unknown top-level keys ['cluster'] beside brokers"
    )
    bomb = (
        "a: &a [x, x, x, x, x, x, x, x, x]\n"
        + "".join(
            f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
            for p, c in zip("abcdefgh", "bcdefghi", strict=True)
        )
        + "brokers:\n- id: *i\n"
        + one
    )
    assert (
        inventory_error(bomb)
        == "brokers.yaml: YAML aliases (*name) are not taken in an inventory; write each broker out"
    )
    long_host = "h" * 5000 + " x"
    message = inventory_error(f"brokers:\n- id: 1\n  host: {long_host}\n  log_dirs: [/d]\n")
    assert len(message) < 200 and "hhh..." in message
