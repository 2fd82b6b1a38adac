"""Run with the Airflow virtualenv's Python: the fleet DAGs as a DagBag sees them with the runner of the Variable
(AIRFLOW_VAR_KAFKA_INDEX_REBUILD), the inventory loader's answers, and the pod a broker's KubernetesPodOperator
would create (rendered by the provider's own build_pod_request_obj: no cluster is needed, none is contacted)."""

import json
import sys

from airflow.dag_processing.dagbag import DagBag

dagbag = DagBag(dag_folder=sys.argv[1])
facts = {"import_errors": {k: str(v)[-800:] for k, v in dagbag.import_errors.items()}, "dags": {}}
for dag_id, dag in dagbag.dags.items():
    facts["dags"][dag_id] = {
        "tasks": sorted(t.task_id for t in dag.tasks),
        "edges": sorted([t.task_id, d] for t in dag.tasks for d in t.downstream_task_ids),
        "operators": {t.task_id: type(t).__name__ for t in dag.tasks},
        "schedule": None if dag.schedule is None else str(dag.schedule),
        "params": sorted(dag.params),
    }
fleet_dag = dagbag.dags["kafka_index_fleet"]
verify = fleet_dag.get_task("verify_broker")
facts["verify_partial"] = {
    "execution_timeout_s": verify.partial_kwargs["execution_timeout"].total_seconds(),
    "max_active_tis_per_dagrun": verify.partial_kwargs["max_active_tis_per_dagrun"],
}
facts["summary_trigger_rule"] = str(fleet_dag.get_task("summary").trigger_rule)

import kafka_index_common  # noqa: E402
import kafka_index_fleet_common as fc  # noqa: E402

settings = kafka_index_common.load_settings(sys.argv[2])
fleet = fc.fleet_settings(settings)
good = "brokers:\n  - {id: 1, host: kafka-1, log_dirs: [/var/lib/kafka/data]}\n  - {id: 2, host: kafka-2, server_properties: /etc/kafka/server.properties, node: node-b}\n"
facts["inventory"] = fc.parse_inventory(good, "brokers.yaml")
bad = (
    "- {id: 1, host: kafka-1, log_dirs: [/d]}\n- {id: 1, host: kafka-1b, log_dirs: [/d]}\n"
    "- {id: x, host: 'a b', log_dirs: [rel]}\n- {id: 4, host: h4}\n- {id: 5, hots: h5, log_dirs: [/d]}\n- 7\n"
)
try:
    fc.parse_inventory(bad, "brokers.yaml")
except ValueError as exc:
    facts["inventory_errors"] = str(exc).splitlines()
broker = facts["inventory"][1]
args = fc.kafka_index_args(fleet, broker, mode="verify", run_id="fleet-1", audit_table="s3://b/audit")
facts["verify_args"] = args
facts["repair_args"] = fc.kafka_index_args(
    fleet, broker, mode="repair", run_id="r-1", audit_table=None, dry_run=False, backup_dir="/bk"
)
facts["sync_args"] = {
    f"{mode} {sync}": fc.kafka_index_args(fleet, broker, mode=mode, run_id="r-1", audit_table=None, sync=sync)
    for mode, sync in (("verify", "fsync"), ("repair", "fsync"), ("repair", "auto"))
}
kwargs = fc.broker_task_kwargs(fleet, broker, args)
facts["kwargs_keys"] = sorted(kwargs)

from airflow.providers.cncf.kubernetes.operators.pod import KubernetesPodOperator  # noqa: E402

operator = KubernetesPodOperator(
    task_id="render", namespace=fleet["kubernetes"]["namespace"], image=fleet["kubernetes"]["image"], **kwargs
)
pod = operator.build_pod_request_obj(None, dry_run=True)  # no API client: no cluster here
facts["pod"] = pod.to_dict()
print("FACTS " + json.dumps(facts, default=str))
