"""On-demand kafka-index DAG: verify, rebuild or repair chosen topics/partitions from the trigger form.

The Params schema validates the form; a small task turns it into the ``spark-submit`` call of
``jobs/<mode>.py`` (no index logic here). The job's exit code is the task's outcome: findings left or
failures fail the run; its JSON report is kept under the report dir. Each try of the job has its own run
id (``<Airflow run id>-<mode>-try<N>``): the job refuses a writing run under an id an earlier run used.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from typing import Any

import pendulum
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Context, Param, get_current_context, task

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # the shared module beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_index_common import (  # noqa: E402
    MODES,
    application,
    job_arguments,
    load_settings,
    report_path,
    safe_name,
    submit_options,
)


class JobSubmitOperator(SparkSubmitOperator):
    """``spark-submit`` of a job with ``--run-id`` rendered at each try from ``job_run_id`` (templated): the
    job's other arguments come from an upstream task, whose result is not rendered."""

    template_fields: Sequence[str] = (*SparkSubmitOperator.template_fields, "job_run_id")

    def __init__(self, *, job_run_id: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.job_run_id = job_run_id

    def execute(self, context: Context) -> None:
        self.application_args = [*(self.application_args or []), "--run-id", self.job_run_id]
        super().execute(context)


DAG_ID = "kafka_index_on_demand"
SETTINGS = load_settings()
PARTITIONS_PATTERN = r"^$|^\d+(-\d+)?(,\d+(-\d+)?)*$"

PARAMS = {
    "log_dirs": Param(
        SETTINGS["log_dirs"] or ["/var/lib/kafka/data"],
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
        description="verify (read-only), rebuild (rewrite every index) or repair (only what is wrong)",
    ),
    "dry_run": Param(
        True, type="boolean", title="Dry run", description="rebuild or repair: report what would change, write nothing"
    ),
    "truncate_corrupt_tail": Param(
        False,
        type="boolean",
        title="Truncate corrupt tail",
        description="repair: also cut a corrupt .log tail (saved to the backup dir first)",
    ),
}

with DAG(
    dag_id=DAG_ID,
    description="Verify, rebuild or repair Kafka index files of chosen topics and partitions",
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
        """The job file and its arguments for this run's (already validated) Params."""
        context = get_current_context()
        p = context["params"]
        report = report_path(SETTINGS, DAG_ID, context["run_id"], p["mode"])
        os.makedirs(os.path.dirname(report), exist_ok=True)  # the job writes --json there, never creates dirs
        return {
            "application": application(SETTINGS, p["mode"]),
            "args": job_arguments(
                SETTINGS,
                mode=p["mode"],
                log_dirs=list(p["log_dirs"]),
                report=report,
                topics=p["topics"],
                partitions=p["partitions"] or None,
                dry_run=p["dry_run"],
                truncate_corrupt_tail=p["truncate_corrupt_tail"],
            ),  # --run-id: run_job adds it, per try
        }

    arguments = build_arguments()
    JobSubmitOperator(
        task_id="run_job",
        name="kafka-index-on-demand",
        application=arguments["application"],
        application_args=arguments["args"],
        job_run_id="{{ run_id | safe_name }}-{{ params.mode }}-try{{ ti.try_number }}",
        **submit_options(SETTINGS),
    )
