"""Cluster mode as the README says it, for real: a Spark standalone master and two workers on 127.0.0.1
(pyspark's ``spark-class``: each worker its own JVM, its executors their own JVMs and Python workers),
the executors' Python from ``make package``'s archive, the driver on the project's own venv, jobs submitted
with ``spark-submit --master spark://...`` exactly as the README shows. Verify and repair must give what
the embedded local run gives, byte for byte, and the executors must really have run from the archive."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from indexlib.engine import rebuild_partition
from indexlib.testing.generate import generate_partition

from ..conftest import CLUSTER_APP_CONF, PROJECT_ROOT, requires_object_storage, storage_flags, upload

pytest.importorskip("pyspark", reason="the cluster test needs the [spark] extra (make test installs it)")
sys.path.insert(0, str(PROJECT_ROOT / "tools"))
from standalone_cluster import spark_submit, submit_argv  # noqa: E402


def applications(cluster) -> set[str]:
    return {d.name for w in cluster.workers for d in w.iterdir() if d.name.startswith("app-")}


def index_bytes(logs: Path) -> dict[str, bytes]:
    return {str(p.relative_to(logs)): p.read_bytes() for p in sorted(logs.rglob("*")) if p.is_file()}


def test_verify_and_repair_on_a_standalone_cluster_match_the_local_run(cluster, executor_archive, tmp_path):
    earlier = applications(cluster)  # the cluster is the session's
    logs = tmp_path / "logs"
    expected = tmp_path / "expected"
    for p in range(4):
        generate_partition(logs / f"orders-{p}", segments=2, batches_per_segment=80, transactional_producers=2, seed=p)
        rebuild_partition(logs / f"orders-{p}")
    shutil.copytree(logs, expected)
    for index in logs.glob("orders-*/*.index"):
        index.write_bytes(index.read_bytes()[:-3])  # torn
    (logs / "orders-2" / "00000000000000000000.timeindex").unlink()

    report = tmp_path / "verify.json"
    done = spark_submit(cluster.url, "verify", "--log-dir", logs, "--audit-table", tmp_path / "audit", "--json", report,
                        archive=executor_archive, conf=CLUSTER_APP_CONF)  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    # quiet as a local run: the JVM logs errors only (conf/log4j2.properties through the README's --conf)
    assert not [line for line in done.stderr.splitlines() if " INFO " in line or " WARN " in line], done.stderr[:3000]
    flagged = {
        (os.path.relpath(f["file"], logs), f["kind"]) for f in json.loads(report.read_text())["remaining_findings"]
    }
    damaged = {(str(p.relative_to(logs)), "bad_length") for p in logs.glob("orders-*/*.index")}
    assert flagged == damaged | {("orders-2/00000000000000000000.timeindex", "timeindex_missing")}

    done = spark_submit(cluster.url, "repair", "--log-dir", logs, "--audit-table", tmp_path / "audit", "--backup-dir",
                        tmp_path / "backups", archive=executor_archive, conf=CLUSTER_APP_CONF)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert index_bytes(logs) == index_bytes(expected)

    # the executors were the workers' own processes, running Python from the unpacked archive
    apps = [d for w in cluster.workers for d in w.iterdir() if d.name.startswith("app-") and d.name not in earlier]
    assert len({d.name for d in apps}) == 2  # one application per spark-submit
    for work in cluster.workers:  # ... each with an executor on both workers: two separate processes
        assert {d.name for d in work.iterdir() if d.name.startswith("app-")} - earlier == {d.name for d in apps}
    pythons = [python for app in apps for python in app.glob("*/env/bin/python")]
    assert pythons, "no executor unpacked the archive"
    stderr = "".join(p.read_text(errors="replace") for app in apps for p in app.glob("*/stderr"))
    assert "Traceback" not in stderr


@requires_object_storage
def test_verify_and_rebuild_of_a_log_dir_in_object_storage_on_the_cluster(cluster, executor_archive, s3, tmp_path):
    """Issue 39: the executors (two workers' JVMs, Python from the archive) read a log dir's copy in S3 (moto on
    127.0.0.1) themselves, with the storage options the task carries: verify finds the local verify's findings,
    and rebuild into a local dir, and into a new prefix of the bucket, writes the local rebuild's bytes."""
    logs = tmp_path / "logs"
    for p in range(3):
        generate_partition(logs / f"orders-{p}", segments=2, batches_per_segment=80, transactional_producers=1, seed=p)
        rebuild_partition(logs / f"orders-{p}")
    (logs / "orders-1" / "00000000000000000000.index").unlink()
    uri = upload(s3[1], logs, "cluster/logs")
    report = tmp_path / "verify.json"
    done = spark_submit(cluster.url, "verify", "--log-dir", uri, "--audit-table", "none", "--json", report,
                        *storage_flags(s3[0]), archive=executor_archive, conf=CLUSTER_APP_CONF)  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
    flagged = {(f["file"], f["kind"]) for f in json.loads(report.read_text())["remaining_findings"]}
    assert flagged == {(f"{uri}/orders-1/00000000000000000000.index", "index_missing")}
    done = spark_submit(cluster.url, "rebuild", "--log-dir", uri, "--audit-table", "none", "--output-dir",
                        tmp_path / "out", *storage_flags(s3[0]), archive=executor_archive,
                        conf=CLUSTER_APP_CONF)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    expected = {k: v for k, v in index_bytes(logs).items() if not k.endswith(".log") and not k.endswith(".snapshot")}
    rebuilt = index_bytes(tmp_path / "out")
    assert {k: rebuilt[k] for k in expected if k in rebuilt} == {k: v for k, v in expected.items() if k in rebuilt}
    assert len(rebuilt) == 3 * 2 * 3  # every segment's three index files, the deleted one too
    done = spark_submit(cluster.url, "rebuild", "--log-dir", uri, "--audit-table", "none", "--output-dir",
                        f"{uri}-rebuilt", *storage_flags(s3[0]), archive=executor_archive,
                        conf=CLUSTER_APP_CONF)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    prefix = uri.split("/", 3)[3] + "-rebuilt/"
    listed = s3[1].list_objects_v2(Bucket=uri.split("/")[2], Prefix=prefix)["Contents"]
    objects = {o["Key"][len(prefix) :]: s3[1].get_object(Bucket=uri.split("/")[2], Key=o["Key"])["Body"].read()
               for o in listed}  # fmt: skip
    assert objects == rebuilt  # the executors put them, the driver's commit named them
    stderr = "".join(p.read_text(errors="replace") for w in cluster.workers for p in w.glob("app-*/*/stderr"))
    assert "Traceback" not in stderr


def test_the_on_demand_dag_repairs_on_the_cluster(cluster, executor_archive, tmp_path):
    """Real Airflow (``airflow dags test``) submitting the on-demand repair to the standalone cluster with
    the DAG settings a cluster needs (the archive; the driver's Python follows from project_dir)."""
    from ..airflow.test_dags import AIRFLOW, airflow_env, dags_test, damaged_log_dir, state_of

    if not AIRFLOW.exists():
        pytest.skip("Airflow's own virtualenv .venv-airflow is missing: `make test` sets it up")
    logs, good = damaged_log_dir(tmp_path)
    settings = {
        "report_dir": str(tmp_path / "reports"),
        "audit_table": str(tmp_path / "audit"),
        "backup_dir": str(tmp_path / "backups"),
        "archives": f"{executor_archive}#env",
        "conf": CLUSTER_APP_CONF,
    }
    env = airflow_env(
        tmp_path / "home", env_variable=settings
    )  # archives is read while parsing: a Variable from the env
    env["AIRFLOW_CONN_SPARK_DEFAULT"] = cluster.url + "?deploy-mode=client"
    apps_before = applications(cluster)
    done = dags_test(env, "kafka_index_on_demand", {"log_dirs": [str(logs)], "mode": "repair", "dry_run": False})
    assert state_of(done) == "success", (done.stdout + done.stderr)[-4000:]
    assert {str(p.relative_to(logs)): p.read_bytes() for p in logs.rglob("*") if p.is_file()} == good
    assert "--archives" in done.stdout + done.stderr  # the task log shows the spark-submit it ran
    assert len(applications(cluster) - apps_before) == 1  # the DAG's repair ran on the cluster's executors


def test_the_readme_standalone_command_is_the_one_these_tests_run():
    readme = (PROJECT_ROOT / "README.md").read_text()
    block = re.search(r"```bash\nmake package\n(spark-submit --master spark://host:7077.*?)\n```", readme, re.S)
    assert block, "the README's standalone spark-submit block"
    command = block.group(1).replace("\\\n", " ").replace("$PWD", str(PROJECT_ROOT))
    documented = [  # run from the project dir: a relative path there is the project's
        (flag, value if flag != "archives" or value.startswith("/") else f"{PROJECT_ROOT}/{value}")
        for flag, value in re.findall(r"--(archives|conf) (\S+)", command)
    ]
    ours = submit_argv("spark://host:7077", "verify")
    run = list(zip(ours, ours[1:], strict=False))
    assert sorted(documented) == sorted((flag[2:], value) for flag, value in run if flag in ("--archives", "--conf"))
