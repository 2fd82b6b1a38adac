"""On-demand kafka-index DAG: verify, rebuild, repair or recover chosen topics/partitions from the trigger form.

The Params schema validates the form; a small task, ``build_arguments``, reads the run's settings (see
kafka_index_common: what is read while parsing, what by this task) and turns the form into the
``spark-submit`` call of ``jobs/spark_job.py MODE`` (no index logic here). The job's exit code is the task's
outcome: a verify, rebuild, repair or recover that leaves findings, or that could not do its work, fails the run; a
dry run's findings are its answer (it fails only when it could not do its work). The JSON report is kept
under the report dir. Each try of the job has its own run id (``<Airflow run id>-<mode>-try<N>``): the job
refuses a writing run under an id an earlier run used.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pendulum
from airflow.sdk import DAG, Param, get_current_context, task

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # the shared module beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_index_common import (  # noqa: E402
    MODES,
    JobSubmitOperator,
    job_arguments,
    parse_time_settings,
    report_path,
    run_settings,
    safe_name,
    spark_conf,
    submit_options,
    sync_param,
)

DAG_ID = "kafka_index_on_demand"
SETTINGS = parse_time_settings()
PARTITIONS_PATTERN = r"^$|^\d+(-\d+)?(,\d+(-\d+)?)*$"

PARAMS = {
    "log_dirs": Param(
        SETTINGS["log_dirs"] or ["/var/lib/kafka/data"],  # the settings' while parsing: a default only
        type="array",
        minItems=1,
        items={"type": "string", "minLength": 1},
        title="Log dirs",
        description="Kafka log dirs (log.dirs) to work on; visible to the Spark driver and executors",
    ),
    "topics": Param(
        ".*", type="string", minLength=1, title="Topics regex", description="only topics whose whole name matches"
    ),
    "partitions": Param(
        "", type="string", pattern=PARTITIONS_PATTERN, title="Partitions", description="e.g. 0,3,5-7; empty for all"
    ),
    "mode": Param(
        "verify",
        type="string",
        enum=list(MODES),
        title="Mode",
        description="verify (read-only), rebuild (rewrite every index), repair (only what is wrong) or recover "
        "(after an unclean shutdown, the broker stopped: do its start's recovery offline)",
    ),
    "dry_run": Param(
        True,
        type="boolean",
        title="Dry run",
        description="rebuild, repair or recover: report what would change, write nothing",
    ),
    "truncate_corrupt_tail": Param(
        False,
        type="boolean",
        title="Truncate corrupt tail",
        description="repair: also cut a corrupt .log tail (saved to the backup dir first)",
    ),
    "sync": sync_param(SETTINGS["sync"]),
}

with DAG(
    dag_id=DAG_ID,
    description="Verify, rebuild, repair or recover Kafka index files of chosen topics and partitions",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params=PARAMS,
    user_defined_filters={"safe_name": safe_name},
    tags=["kafka", "kafka-index"],
    doc_md=__doc__,
) as dag:

    @task(task_id="build_arguments", multiple_outputs=True)
    def build_arguments() -> dict[str, Any]:
        """The job's arguments (the mode first; ``--run-id``: per try, by the operator) and Spark conf for this run's
        (already validated) Params and its settings, read now (a task can read the Variable; the parse may not
        have); creates the run's report dir (the job writes its --json there and never creates directories)."""
        context = get_current_context()
        p = context["params"]
        settings = run_settings(SETTINGS)
        report = report_path(settings, DAG_ID, context["run_id"], p["mode"])
        os.makedirs(os.path.dirname(report), exist_ok=True)
        return {
            "args": job_arguments(
                settings,
                mode=p["mode"],
                log_dirs=list(p["log_dirs"]),
                report=report,
                topics=p["topics"],
                partitions=p["partitions"] or None,
                dry_run=p["dry_run"],
                truncate_corrupt_tail=p["truncate_corrupt_tail"],
                sync=p["sync"],
            ),
            "conf": spark_conf(settings),
            "submit": submit_options(settings),
        }

    arguments = build_arguments()
    JobSubmitOperator(
        task_id="run_job",
        name="kafka-index-on-demand",
        application_args=arguments["args"],
        conf=arguments["conf"],
        job_run_id="{{ run_id | safe_name }}-{{ params.mode }}-try{{ ti.try_number }}",
        submit=arguments["submit"],
    )
