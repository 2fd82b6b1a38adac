"""Run with the Airflow virtualenv's Python: import airflow_dags/ with a DagBag and print, as JSON, the
facts the DAG tests assert on (structure, params schema and validation, rendered spark-submit calls)."""

import json
import sys

from airflow.dag_processing.dagbag import DagBag

dagbag = DagBag(dag_folder=sys.argv[1])
facts = {"import_errors": {k: str(v)[-500:] for k, v in dagbag.import_errors.items()}, "dags": {}}
for dag_id, dag in dagbag.dags.items():
    facts["dags"][dag_id] = {
        "tasks": sorted(t.task_id for t in dag.tasks),
        "edges": sorted([t.task_id, d] for t in dag.tasks for d in t.downstream_task_ids),
        "schedule": None if dag.schedule is None else str(dag.schedule),
        "catchup": dag.catchup,
        "params": {k: dag.params.get_param(k).schema for k in dag.params},
        "param_defaults": {k: dag.params.get_param(k).value for k in dag.params},
        "operators": {t.task_id: type(t).__name__ for t in dag.tasks},
        "conn_ids": sorted({getattr(t, "_conn_id", None) or "" for t in dag.tasks} - {""}),
    }

# Params validation: good and bad payloads of the on-demand DAG.
from airflow.sdk.definitions.param import ParamsDict  # noqa: E402

on_demand = dagbag.dags["kafka_index_on_demand"]
checks = {}
for name, payload in json.loads(sys.argv[2]).items():
    params = ParamsDict(on_demand.params)
    try:
        for key, value in payload.items():
            params[key] = value
        params.validate()
        checks[name] = "valid"
    except Exception as exc:  # ParamValidationError
        checks[name] = f"invalid: {type(exc).__name__}"
facts["param_checks"] = checks


# The tasks that read each run's settings, run as a task would (with this process's Variable, from
# AIRFLOW_VAR_KAFKA_INDEX_REBUILD), and the --run-id each job's operator renders for a second try.
from airflow.sdk.execution_time.context import set_current_context  # noqa: E402


class TaskInstance:  # what the templates read of the context's task instance
    try_number = 2


def build_arguments(dag, context):
    with set_current_context(context):
        return dag.get_task("build_arguments").python_callable()


def run_id_of(task, context):
    return task.render_template(task.job_run_id, dict(context, ti=TaskInstance()))


scheduled = dagbag.dags["kafka_index_scheduled"]
context = {"run_id": "scheduled__2026-11-21T00:00:00+00:00"}
facts["scheduled_arguments"] = build_arguments(scheduled, context)
facts["scheduled_submit_from"] = {t: str(scheduled.get_task(t).submit) for t in ("verify", "repair")}
facts["scheduled_run_ids"] = {t: run_id_of(scheduled.get_task(t), context) for t in ("verify", "repair")}
payload = json.loads(sys.argv[3])
context = {"run_id": "manual__2026-11-23T16:34:09+00:00", "params": payload}
facts["on_demand_arguments"] = build_arguments(on_demand, context)
facts["on_demand_run_id"] = run_id_of(on_demand.get_task("run_job"), context)
facts["on_demand_submit_from"] = str(on_demand.get_task("run_job").submit)

import kafka_index_common  # noqa: E402  (airflow_dags/ is on sys.path once the DagBag has loaded it)

settings = kafka_index_common.load_settings(None)
archive = dict(
    settings, archives="/d/env.tar.gz#env", conf={"spark.executor.memory": "2g", "spark.pyspark.python": "/py"}
)
facts["submit_options_archive"] = kafka_index_common.submit_options(archive)
facts["spark_conf_archive"] = kafka_index_common.spark_conf(archive)
facts["submit_options_local"] = kafka_index_common.submit_options(settings)
facts["spark_conf_local"] = kafka_index_common.spark_conf(settings)
facts["spark_conf_driver_python"] = kafka_index_common.spark_conf(dict(settings, driver_python="/opt/ki/bin/python"))
try:
    kafka_index_common.job_arguments(
        settings, mode="rebuild", log_dirs=["/x"], report="/r.json", truncate_corrupt_tail=True
    )
    facts["truncate_with_rebuild"] = "accepted"
except ValueError as exc:
    facts["truncate_with_rebuild"] = str(exc)
facts["sync_args"] = {
    mode: kafka_index_common.job_arguments(settings, mode=mode, log_dirs=["/x"], report="/r.json", sync="syncfs")
    for mode in kafka_index_common.MODES
}
try:
    kafka_index_common.job_arguments(settings, mode="recover", log_dirs=["/x"], report="/r.json", sync="fdatasync")
    facts["bad_sync"] = "accepted"
except ValueError as exc:
    facts["bad_sync"] = str(exc)
try:
    kafka_index_common.load_settings(json.dumps({"sync": "fdatasync"}))
    facts["bad_sync_setting"] = "accepted"
except ValueError as exc:
    facts["bad_sync_setting"] = str(exc)
facts["exit_zero_on_findings"] = {
    f"{mode}{' dry' if dry else ''}": "--exit-zero-on-findings"
    in kafka_index_common.job_arguments(settings, mode=mode, log_dirs=["/x"], report="/r.json", dry_run=dry)
    for mode in kafka_index_common.MODES
    for dry in (False, True)
}
print("FACTS " + json.dumps(facts))
