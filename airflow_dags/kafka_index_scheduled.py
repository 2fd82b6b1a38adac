"""Scheduled kafka-index DAG: a daily ``verify`` of the configured log dirs, then ``repair`` only when the
verify report has findings and repair is enabled (a branch on the report, not a blind second job).

Settings: ``conf/airflow.yaml`` or the Airflow Variable ``kafka_index_rebuild`` (see kafka_index_common).
"""

from __future__ import annotations

import os
import sys

import pendulum
from airflow.exceptions import AirflowFailException
from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, task

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # the shared module beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_index_common import (  # noqa: E402
    application,
    findings_in,
    job_arguments,
    load_settings,
    safe_name,
    submit_options,
)

DAG_ID = "kafka_index_scheduled"
SETTINGS = load_settings()
REPORTS = SETTINGS["report_dir"] + "/" + DAG_ID + "/{{ run_id | safe_name }}"

with DAG(
    dag_id=DAG_ID,
    description="Daily verify of Kafka index files, repair when needed",
    schedule=SETTINGS["schedule"],
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    user_defined_filters={"safe_name": safe_name},
    tags=["kafka", "kafka-index"],
    doc_md=__doc__,
) as dag:

    @task(task_id="prepare_reports")
    def prepare_reports(report_dir: str) -> None:
        """The run's report dir (the jobs write their --json there and never create directories)."""
        os.makedirs(report_dir, exist_ok=True)

    verify = SparkSubmitOperator(
        task_id="verify",
        name="kafka-index-verify",
        application=application(SETTINGS, "verify"),
        application_args=job_arguments(
            SETTINGS,
            mode="verify",
            log_dirs=SETTINGS["log_dirs"] or ["<set log_dirs>"],
            report=REPORTS + "/verify.json",
            run_id="{{ run_id | safe_name }}-verify-try{{ ti.try_number }}",  # a retry is a new run: new id
            exit_zero_on_findings=True,
        ),
        **submit_options(SETTINGS),
    )

    @task.branch(task_id="decide")
    def decide(report: str, repair_enabled: bool) -> str:
        """repair when verify found problems and repair is enabled; else done or fail loudly."""
        left = findings_in(report)
        if left == 0:
            return "healthy"
        return "repair" if repair_enabled else "findings_left"

    @task(task_id="findings_left")
    def findings_left(report: str) -> None:
        raise AirflowFailException(f"verify found {findings_in(report)} problems and repair is disabled; see {report}")

    repair = SparkSubmitOperator(
        task_id="repair",
        name="kafka-index-repair",
        application=application(SETTINGS, "repair"),
        application_args=job_arguments(
            SETTINGS,
            mode="repair",
            log_dirs=SETTINGS["log_dirs"] or ["<set log_dirs>"],
            report=REPORTS + "/repair.json",
            run_id="{{ run_id | safe_name }}-repair-try{{ ti.try_number }}",  # a retry is a new run: new id
        ),
        **submit_options(SETTINGS),
    )
    healthy = EmptyOperator(task_id="healthy")

    branch = decide(REPORTS + "/verify.json", SETTINGS["repair_enabled"])
    prepare_reports(REPORTS) >> verify >> branch >> [repair, healthy, findings_left(REPORTS + "/verify.json")]
