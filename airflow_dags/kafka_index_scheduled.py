"""Scheduled kafka-index DAG: a daily ``verify`` of the configured log dirs, then ``repair`` only when the
verify report has findings and repair is enabled (a branch on the report, not a blind second job). The verify task
returns its report's outcome through XCom (read where its driver wrote the report), so the branch runs anywhere.

Settings: ``conf/airflow.yaml`` or the Airflow Variable ``kafka_index_rebuild`` (see kafka_index_common). The
schedule and what shapes the operators are read when this file is parsed; the log dirs and the rest of a run's
settings by its first task, ``build_arguments`` (no log dirs: it fails, and no job runs).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, get_current_context, task
from airflow.sdk.exceptions import AirflowFailException

if os.path.dirname(os.path.abspath(__file__)) not in sys.path:  # the shared module beside this file
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kafka_index_common import (  # noqa: E402
    JobSubmitOperator,
    findings_in,
    job_arguments,
    parse_time_settings,
    report_path,
    require_log_dirs,
    run_settings,
    safe_name,
    spark_conf,
    submit_options,
)

DAG_ID = "kafka_index_scheduled"
SETTINGS = parse_time_settings()

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

    @task(task_id="build_arguments", multiple_outputs=True)
    def build_arguments() -> dict[str, Any]:
        """The run's settings, read now (a task can read the Variable; the parse may not have): both jobs'
        arguments (``--run-id``: per try, by the operator) and Spark conf; creates the run's report dir (the
        jobs write their --json there and never create directories)."""
        run_id = get_current_context()["run_id"]
        settings = run_settings(SETTINGS)
        log_dirs = require_log_dirs(settings)
        reports = {mode: report_path(settings, DAG_ID, run_id, mode) for mode in ("verify", "repair")}
        os.makedirs(os.path.dirname(reports["verify"]), exist_ok=True)
        return {
            # findings are the branch's to judge from the report, not a failure of the job
            "verify": job_arguments(
                settings, mode="verify", log_dirs=log_dirs, report=reports["verify"], exit_zero_on_findings=True
            ),
            "repair": job_arguments(
                settings, mode="repair", log_dirs=log_dirs, report=reports["repair"], sync=settings["sync"]
            ),
            "conf": spark_conf(settings),
            "submit": submit_options(settings),
            "verify_report": reports["verify"],
            "repair_enabled": bool(settings["repair_enabled"]),
        }

    arguments = build_arguments()

    def submit(mode: str) -> JobSubmitOperator:
        """The job in ``mode`` with this run's arguments; a retry is a new run, with a new run id."""
        return JobSubmitOperator(
            task_id=mode,
            name=f"kafka-index-{mode}",
            application_args=arguments[mode],
            conf=arguments["conf"],
            job_run_id=f"{{{{ run_id | safe_name }}}}-{mode}-try{{{{ ti.try_number }}}}",
            submit=arguments["submit"],
        )

    verify = submit("verify")

    @task.branch(task_id="decide")
    def decide(outcome: dict[str, Any] | None, repair_enabled: bool) -> str:
        """repair when verify found problems and repair is enabled; else done or fail loudly. ``outcome``: the
        verify task's (XCom), so this task may run on any worker."""
        left = findings_in(outcome)
        if left == 0:
            return "healthy"
        return "repair" if repair_enabled else "findings_left"

    @task(task_id="findings_left")
    def findings_left(outcome: dict[str, Any]) -> None:
        raise AirflowFailException(
            f"verify found {findings_in(outcome)} problems ({outcome['remaining']}) and repair is disabled; see "
            f"{outcome['report']} and the audit table's rows of run {outcome['run_id']}"
        )

    repair = submit("repair")
    healthy = EmptyOperator(task_id="healthy")

    branch = decide(verify.output, arguments["repair_enabled"])
    verify >> branch >> [repair, healthy, findings_left(verify.output)]
