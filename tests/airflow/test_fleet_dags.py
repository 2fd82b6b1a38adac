"""The fleet DAGs' shape, inventory loader, commands and the Kubernetes runner's pod, read from a real DagBag in
Airflow's own virtualenv (``fleet_facts.py``). The pod is rendered by the cncf provider's own
``build_pod_request_obj(dry_run=True)``; no Kubernetes cluster runs here, so none is contacted."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AIRFLOW_VENV = ROOT / ".venv-airflow"
VARIABLE = {
    "fleet": {
        "runner": "kubernetes",
        "kubernetes": {"image": "registry/kafka-index:1", "namespace": "kafka"},
        "audit_storage_options": {"AWS_REGION": "eu-west-1"},
    }
}

pytestmark = pytest.mark.skipif(
    not list(AIRFLOW_VENV.glob("lib/python*/site-packages/airflow/providers/cncf/kubernetes")),
    reason="needs .venv-airflow with apache-airflow-providers-cncf-kubernetes (`make test` installs it)",
)


@pytest.fixture(scope="module")
def facts(tmp_path_factory):
    env = {
        "AIRFLOW_HOME": str(tmp_path_factory.mktemp("airflow-home")),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
        "AIRFLOW_VAR_KAFKA_INDEX_REBUILD": json.dumps(VARIABLE),
        "PYTHONPATH": str(ROOT),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [str(AIRFLOW_VENV / "bin" / "python"), str(ROOT / "tests/airflow/fleet_facts.py"), str(ROOT / "airflow_dags"),
         json.dumps(VARIABLE)],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("FACTS ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1][6:])


def test_the_fleet_dags_beside_the_two(facts):
    assert facts["import_errors"] == {}
    assert set(facts["dags"]) == {
        "kafka_index_scheduled", "kafka_index_on_demand", "kafka_index_fleet", "kafka_index_rolling_repair"
    }  # fmt: skip
    fleet = facts["dags"]["kafka_index_fleet"]
    assert fleet["edges"] == [
        ["commands", "verify_broker"], ["inventory", "commands"], ["inventory", "summary"], ["verify_broker", "summary"]
    ]  # fmt: skip
    assert fleet["operators"]["verify_broker"] == "MappedOperator" and fleet["params"] == ["fleet_run_id"]
    assert facts["summary_trigger_rule"].endswith("ALL_DONE")  # it runs whatever the brokers' tasks ended with
    assert facts["verify_partial"] == {"execution_timeout_s": 7200.0, "max_active_tis_per_dagrun": 16}
    rolling = facts["dags"]["kafka_index_rolling_repair"]
    assert rolling["schedule"] is None and rolling["params"] == ["brokers", "dry_run", "sync"]


def test_the_inventory_names_every_bad_entry_on_a_line(facts):
    assert [b["id"] for b in facts["inventory"]] == [1, 2]
    assert facts["inventory"][1]["node"] == "node-b" and facts["inventory"][0]["node"] == "kafka-1"
    assert facts["inventory_errors"] == [
        "brokers.yaml: broker #2 (id 1): id 1 repeats broker #1",
        "brokers.yaml: broker #3: id must be a broker id (an integer from 0 to 2147483647), got 'x'; host must be a "
        "host name or address, got 'a b'; log_dirs must be a list of absolute paths, got ['rel']",
        "brokers.yaml: broker #4 (id 4): give log_dirs or server_properties (where the broker's data is on its host)",
        "brokers.yaml: broker #5 (id 5): unknown keys ['hots'] (known: ['host', 'id', 'log_dirs', 'node', "
        "'server_properties', 'ssh_conn_id']); host must be a host name or address, got None",
        "brokers.yaml: broker #6: a mapping is needed, got 7",
    ]


def test_a_brokers_commands(facts):
    """verify: the broker id (a meta.properties naming another broker refuses the run), the shared run id and
    table; findings exit 0 (the summary judges them). A repair that writes leaves findings red."""
    assert facts["verify_args"] == [
        "/opt/kafka-index/env/bin/kafka-index", "verify", "--server-properties", "/etc/kafka/server.properties",
        "--broker-id", "2", "--run-id", "fleet-1", "--engine", "spark", "--no-progress", "--audit-table",
        "s3://b/audit", "--audit-storage-option", "AWS_REGION=eu-west-1", "--exit-zero-on-findings",
    ]  # fmt: skip
    assert (
        facts["repair_args"][-2:] == ["--backup-dir", "/bk"] and "--exit-zero-on-findings" not in facts["repair_args"]
    )
    # the settings' sync (the rolling repair's form): passed to a writing mode unless it is the job's own default
    sync = facts["sync_args"]
    assert sync["repair fsync"][-2:] == ["--sync", "fsync"]
    assert "--sync" not in sync["verify fsync"] and "--sync" not in sync["repair auto"]


def test_the_kubernetes_runner_pod_runs_beside_its_broker_read_only(facts):
    """Rendered by the provider (no cluster): on the broker's node, its data mounted read-only where the broker
    has it, the verify command of that broker."""
    assert facts["kwargs_keys"] == ["name", "pod_template_dict"]
    pod = facts["pod"]
    assert pod["metadata"]["namespace"] == "kafka" and pod["metadata"]["name"].startswith("kafka-index-broker-2-")
    assert pod["metadata"]["labels"]["kafka-broker-id"] == "2"
    terms = pod["spec"]["affinity"]["node_affinity"]["required_during_scheduling_ignored_during_execution"]
    assert terms["node_selector_terms"][0]["match_expressions"] == [
        {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-b"]}
    ]
    (volume,) = pod["spec"]["volumes"]
    assert volume["persistent_volume_claim"] == {"claim_name": "data-kafka-2", "read_only": True}
    (container,) = pod["spec"]["containers"]
    assert container["image"] == "registry/kafka-index:1" and container["command"] == ["kafka-index"]
    assert container["args"][:2] == ["verify", "--server-properties"] and "fleet-1" in container["args"]
    (mount,) = container["volume_mounts"]
    assert (mount["name"], mount["mount_path"], mount["read_only"]) == ("kafka-data", "/var/lib/kafka/data", True)
    assert pod["spec"]["restart_policy"] == "Never"
