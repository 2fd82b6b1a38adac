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


# Rendering: the scheduled DAG's verify call for a given run id, and the on-demand DAG's arguments.
class TaskInstance:  # what the templates read of the context's task instance
    try_number = 2


scheduled = dagbag.dags["kafka_index_scheduled"]
verify = scheduled.get_task("verify")
context = {"run_id": "scheduled__2026-11-21T00:00:00+00:00", "ti": TaskInstance()}
facts["rendered_verify"] = {
    "application": verify.render_template(verify.application, context),
    "args": verify.render_template(verify.application_args, context),
}
repair = scheduled.get_task("repair")
facts["rendered_repair_args"] = repair.render_template(repair.application_args, context)
run_job = on_demand.get_task("run_job")
facts["on_demand_run_id"] = run_job.render_template(
    run_job.job_run_id,
    {"run_id": "manual__2026-11-23T16:34:09+00:00", "params": {"mode": "repair"}, "ti": TaskInstance()},
)
import kafka_index_common  # noqa: E402  (airflow_dags/ is on sys.path once the DagBag has loaded it)

settings = kafka_index_common.load_settings()
facts["submit_options_archive"] = kafka_index_common.submit_options(
    dict(settings, archives="/d/env.tar.gz#env", conf={"spark.executor.memory": "2g", "spark.pyspark.python": "/py"})
)
facts["submit_options_local"] = kafka_index_common.submit_options(settings)
try:
    kafka_index_common.job_arguments(
        settings, mode="rebuild", log_dirs=["/x"], report="/r.json", truncate_corrupt_tail=True
    )
    facts["truncate_with_rebuild"] = "accepted"
except ValueError as exc:
    facts["truncate_with_rebuild"] = str(exc)
payload = json.loads(sys.argv[3])
facts["rendered_on_demand"] = {
    "application": kafka_index_common.application(settings, payload["mode"]),
    "args": kafka_index_common.job_arguments(
        settings,
        mode=payload["mode"],
        log_dirs=payload["log_dirs"],
        report=kafka_index_common.report_path(settings, "kafka_index_on_demand", "manual__x", payload["mode"]),
        topics=payload["topics"],
        partitions=payload["partitions"] or None,
        dry_run=payload["dry_run"],
        truncate_corrupt_tail=payload["truncate_corrupt_tail"],
    ),
}
print("FACTS " + json.dumps(facts))
