"""The fleet DAGs end to end (issue 23, items 3 and 4), every component real but a Kubernetes cluster.

Three brokers on this machine: each a real log dir (partitions copied from ``../shared/fixtures/kafka-real``)
with its own ``meta.properties``, each seen at the SAME path by its runner: an SSH server (asyncssh, the real
protocol) on 127.0.0.1N per broker, started inside a mount namespace of its own (``unshare -m``) where that
broker's dir is bind-mounted at the shared path. Real Airflow 3 (api-server, dag-processor, scheduler with the
LocalExecutor, parallelism 4) runs the DAGs; the SSH provider connects to the servers as to sshd; the audit
table lives on moto's S3 server on 127.0.0.1. The kafka-index on the "hosts" is this checkout, with
``--engine local`` (no JVM: three Spark JVMs at once on a 2-core test machine would take minutes).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import copy_fixture

PROJECT_ROOT = Path(__file__).resolve().parents[2]

AIRFLOW_VENV = PROJECT_ROOT / ".venv-airflow"
AIRFLOW = AIRFLOW_VENV / "bin" / "airflow"
FIXTURES = PROJECT_ROOT.parent / "shared" / "fixtures" / "kafka-real" / "local-apache-kafka-4.1.0"
PARTITIONS = ("plain-0", "txn-0", "comp-gzip-0")
CLUSTER = "fleetTestCluster0000AA"
PYTHON = sys.executable
NOEDIT = os.environ.get("PYTHONPATH", "")  # this checkout (and, in a worktree, the editable finder's remover)


def _why_not() -> str | None:
    if not AIRFLOW.exists():
        return "Airflow's own virtualenv .venv-airflow is missing: `make test` sets it up"
    if not FIXTURES.is_dir():
        return f"needs the real-broker fixtures at {FIXTURES} (../shared is absent)"
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return "needs root and unshare(1): each broker's dir is bind-mounted at one path in its own mount namespace"
    if importlib.util.find_spec("asyncssh") is None:
        return "needs asyncssh (the spark-test extra) for the brokers' SSH servers"
    if importlib.util.find_spec("moto") is None:
        return "needs moto[server] (the spark-test extra) for a real S3 API"
    if not list(AIRFLOW_VENV.glob("lib/python*/site-packages/airflow/providers/ssh")):
        return "needs apache-airflow-providers-ssh in .venv-airflow (`make test` installs it)"
    return None


pytestmark = pytest.mark.skipif(_why_not() is not None, reason=_why_not() or "")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _port_free_on_every(hosts: list[str]) -> int:
    """A port no one listens on at any of ``hosts``: the brokers' SSH servers share one (the Airflow connection
    names one port), and a fixed one would clash with another suite on this machine."""
    import socket

    for _ in range(50):
        port = _free_port()
        try:
            for host in hosts:
                with socket.socket() as s:
                    s.bind((host, port))
        except OSError:
            continue
        return port
    raise RuntimeError(f"no port free on every one of {hosts}")


class Fleet:
    """Three brokers behind SSH servers, moto's S3, and a running Airflow."""

    def __init__(self, root: Path) -> None:
        import asyncssh

        sys.path.insert(0, str(PROJECT_ROOT / "benchmarks"))
        import audit_writers

        self.root = root
        self.shared = root / "var-lib-kafka-data"  # the one path every runner sees its broker's disk at
        self.shared_backups = root / "kafka-index-backups"
        self.shared.mkdir()
        self.shared_backups.mkdir()
        self.calls = root / "calls.log"
        self.servers: dict[int, subprocess.Popen[bytes]] = {}
        self.processes: list[subprocess.Popen[bytes]] = []
        key = asyncssh.generate_private_key("ssh-ed25519")
        key.write_private_key(str(root / "client_key"))
        key.write_public_key(str(root / "client_key.pub"))
        asyncssh.generate_private_key("ssh-ed25519").write_private_key(str(root / "host_key"))
        self.brokers = {n: root / f"broker-{n}" for n in (1, 2, 3)}
        for n, data in self.brokers.items():
            data.mkdir()
            for p in PARTITIONS:
                copy_fixture(FIXTURES / p, data / p)
            (data / "meta.properties").write_text(
                f"version=1\nnode.id={n}\ncluster.id={CLUSTER}\ndirectory.id=brokerDir{n}AAAAAAAAAAAAA\n"
            )
            (root / f"backups-{n}").mkdir()
        (root / "record.sh").write_text(
            "#!/bin/sh\n# record a call: step broker time; fail when a fail-<step>-<broker> file exists\n"
            f'echo "$1 $2 $(date +%s.%N)" >> {self.calls}\n'
            f"[ -e {root}/fail-$1-$2 ] && exit 7\nsleep 0.2\nexit 0\n"
        )
        (root / "record.sh").chmod(0o755)
        (root / "inventory.yaml").write_text(
            "brokers:\n"
            + "".join(f"  - id: {n}\n    host: 127.0.0.1{n}\n    log_dirs: [{self.shared}]\n" for n in self.brokers)
        )
        self._moto = audit_writers.moto_server(str(root / "moto.log"))
        self.s3 = audit_writers.s3_options(self._moto.__enter__())
        self.table = f"s3://{audit_writers.BUCKET}/fleet-audit"
        keys = {k: v for k, v in self.s3.items() if k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
        public = {k: v for k, v in self.s3.items() if k not in keys}  # on the command lines, in the task logs
        self.base_env = {**os.environ, **keys, "PYTHONPATH": NOEDIT or str(PROJECT_ROOT)}
        self.ssh_port = _port_free_on_every([f"127.0.0.1{n}" for n in self.brokers])
        for n in self.brokers:
            self.start_server(n)
        self.home = root / "airflow"
        self.home.mkdir()
        me = f"{PYTHON} -m jobs.cli"
        record = f"{root}/record.sh"
        settings = {
            "schedule": None,
            "audit_table": self.table,
            "backup_dir": str(self.shared_backups),
            "fleet": {
                "inventory": str(root / "inventory.yaml"),
                "runner": "ssh",
                "engine": "local",
                "kafka_index": me,
                "summary_kafka_index": me,
                "audit_storage_options": public,
                "extra_args": ["--jobs", "1", "--audit-journal", str(root / "journal")],
                "timeout_minutes": 5,
                "stop_command": f"{record} stop {{broker_id}}",
                "start_command": f"{record} start {{broker_id}}",
                "healthy_command": f"{record} healthy {{broker_id}}",
                "healthy_poll_seconds": 1,
                "healthy_timeout_minutes": 1,
            },
        }
        self.api_port = _free_port()
        connection = {
            "conn_type": "ssh",
            "login": "root",
            "port": self.ssh_port,
            "extra": {"key_file": str(root / "client_key"), "no_host_key_check": True},
        }
        self.env = {
            **self.base_env,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT_ROOT / "airflow_dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.api_port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{self.api_port}/execution/",
            "AIRFLOW__API_AUTH__JWT_SECRET": "fleet-test-secret",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW_VAR_KAFKA_INDEX_REBUILD": json.dumps(settings),
            "AIRFLOW_CONN_KAFKA_INDEX_SSH": json.dumps(connection),
            "PATH": os.pathsep.join([str(AIRFLOW_VENV / "bin"), os.environ.get("PATH", "")]),
        }
        subprocess.run([str(AIRFLOW), "db", "migrate"], env=self.env, capture_output=True, check=True, timeout=300)
        for component in ("api-server", "dag-processor", "scheduler"):
            log = open(root / f"airflow-{component}.log", "wb")  # noqa: SIM115 - the process's, closed with it
            self.processes.append(
                subprocess.Popen(
                    [str(AIRFLOW), component], env=self.env, stdout=log, stderr=log, start_new_session=True, cwd=root
                )  # fmt: skip
            )
        self.wait_for_dags({"kafka_index_fleet", "kafka_index_rolling_repair"})

    # --------------------------------------------------------------------------------- brokers
    def start_server(self, n: int) -> None:
        """Broker n's SSH server on 127.0.0.1n, in a mount namespace where its dirs are at the shared paths."""
        script = (
            f"mount --bind {self.brokers[n]} {self.shared} && mount --bind {self.root}/backups-{n} "
            f"{self.shared_backups} && exec {PYTHON} {PROJECT_ROOT}/tests/airflow/ssh_server.py 127.0.0.1{n} "
            f"{self.ssh_port} {self.root}/host_key {self.root}/client_key.pub"
        )
        log = open(self.root / f"ssh-{n}.log", "ab")  # noqa: SIM115 - the process's
        server = subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", script], env=self.base_env, stdout=log,
            stderr=log, cwd=self.root,
        )  # fmt: skip
        deadline = time.monotonic() + 30
        while b"listening" not in (self.root / f"ssh-{n}.log").read_bytes():
            assert server.poll() is None and time.monotonic() < deadline, (self.root / f"ssh-{n}.log").read_text()
            time.sleep(0.1)
        self.servers[n] = server

    def stop_server(self, n: int) -> None:
        server = self.servers.pop(n)
        server.terminate()
        server.wait(timeout=10)

    # --------------------------------------------------------------------------------- airflow
    def db(self, sql: str, *args: object) -> list[tuple[object, ...]]:
        with sqlite3.connect(self.home / "airflow.db", timeout=30) as c:
            return c.execute(sql, args).fetchall()

    def wait_for_dags(self, dag_ids: set[str]) -> None:
        deadline = time.monotonic() + 240
        while True:
            try:
                have = {r[0] for r in self.db("SELECT dag_id FROM dag WHERE is_stale = 0")}
            except sqlite3.OperationalError:
                have = set()
            if dag_ids <= have:
                return
            assert time.monotonic() < deadline, (self.root / "airflow-dag-processor.log").read_text()[-3000:]
            time.sleep(1)

    def run(self, dag_id: str, conf: dict[str, object], run_id: str) -> str:
        """Trigger a DAG run through the CLI; the final state, from the metadata DB, once the scheduler ends it."""
        subprocess.run(
            [str(AIRFLOW), "dags", "trigger", dag_id, "--run-id", run_id, "--conf", json.dumps(conf)],
            env=self.env, capture_output=True, check=True, timeout=300,
        )  # fmt: skip
        deadline = time.monotonic() + 600
        while True:
            (state,) = self.db("SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", dag_id, run_id)[0]
            if state in ("success", "failed"):
                return str(state)
            assert time.monotonic() < deadline, f"{dag_id} {run_id} still {state}"
            time.sleep(1)

    def tasks(self, dag_id: str, run_id: str) -> dict[str, tuple[str, str, str]]:
        """task (task_id or task_id[map_index]) -> (state, start, end)."""
        rows = self.db(
            "SELECT task_id, map_index, state, start_date, end_date FROM task_instance WHERE dag_id = ? AND run_id = ?",
            dag_id,
            run_id,
        )
        return {(t if m < 0 else f"{t}[{m}]"): (s, a, b) for t, m, s, a, b in rows}  # type: ignore[operator]

    def log(self, dag_id: str, run_id: str, task_id: str) -> str:
        """A task's log: the events' text."""
        text = []
        for path in (self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}" / f"task_id={task_id}").rglob(
            "*.log"
        ):
            for line in path.read_text().splitlines():
                try:
                    event = json.loads(line)
                except ValueError:
                    text.append(line)
                    continue
                text.append(str(event.get("event", "")))
                for err in event.get("error_detail") or []:
                    text.append(f"{err.get('exc_type')}: {err.get('exc_value')}")
        return "\n".join(text)

    def rows(self, run_id: str) -> list[dict[str, object]]:
        from jobs import audit_queries

        return [r for r in audit_queries.read(self.table, self.s3).to_pylist() if r["run_id"] == run_id]

    def close(self) -> None:
        for p in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)  # the component and the workers it started
        for p in self.processes:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        for n in list(self.servers):
            self.stop_server(n)
        self._moto.__exit__(None, None, None)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("fleet"))
    try:
        yield f
    finally:
        f.close()


def index_files(data: Path) -> dict[str, bytes]:
    return {str(p.relative_to(data)): p.read_bytes() for p in sorted(data.rglob("*")) if p.is_file()}


def test_the_fleet_verifies_every_broker_once_into_one_table_on_s3(fleet):
    """Damage on brokers 1 and 2 (segments' index files) and 3 (only a producer snapshot, a partition's finding):
    the brokers' tasks run at once and succeed (findings are the summary's to judge), every broker's rows are there
    exactly once with its identity, the summary names the damage per broker and fails the run; a re-run under the
    same run id adds no row."""
    os.unlink(fleet.brokers[1] / "plain-0" / "00000000000000000000.index")
    os.truncate(fleet.brokers[2] / "txn-0" / "00000000000000000000.timeindex", 5)
    snapshot = fleet.brokers[3] / "txn-0" / "00000000000000000011.snapshot"  # broker 3: only a partition's finding
    original = snapshot.read_bytes()
    data = bytearray(original)
    data[3] ^= 0x01  # its CRC (put back at the end, even when this test fails: the fleet is the module's)
    snapshot.write_bytes(bytes(data))
    try:
        fleet_run_on_damaged_brokers(fleet)
    finally:
        snapshot.write_bytes(original)


def fleet_run_on_damaged_brokers(fleet) -> None:
    state = fleet.run("kafka_index_fleet", {"fleet_run_id": "fleet-a"}, "fleet-a-1")
    tasks = fleet.tasks("kafka_index_fleet", "fleet-a-1")
    assert state == "failed", fleet.log("kafka_index_fleet", "fleet-a-1", "summary")
    assert {t: s for t, (s, _, _) in tasks.items()} == {
        "inventory": "success",
        "commands": "success",
        "verify_broker[0]": "success",
        "verify_broker[1]": "success",
        "verify_broker[2]": "success",
        "summary": "failed",
    }
    # at once: two brokers' tasks overlap (run one after another, none would); on a loaded machine the executor
    # may start the third as the others end, so neither all three at one instant nor each with another is asked
    spans = [tasks[f"verify_broker[{i}]"][1:] for i in range(3)]
    overlapping = [
        (i, j) for i in range(3) for j in range(i + 1, 3) if spans[i][0] < spans[j][1] and spans[j][0] < spans[i][1]
    ]
    assert overlapping, f"the brokers' tasks did not run at once: {spans}"
    rows = fleet.rows("fleet-a")
    segments = {n: sum(1 for _ in data.rglob("*.log")) for n, data in fleet.brokers.items()}
    keys = [
        (r["record_type"], r["broker_id"], r["log_dir"], r["topic"], r["partition"], r["base_offset"]) for r in rows
    ]
    assert len(keys) == len(set(keys)) == sum(segments.values()) + 3  # each segment once, one run row per broker
    for n in fleet.brokers:
        mine = [r for r in rows if r["broker_id"] == n]
        assert {(r["cluster_id"], r["directory_id"], r["log_dir"]) for r in mine} == {
            (CLUSTER, f"brokerDir{n}AAAAAAAAAAAAA", str(fleet.shared))
        }
        assert sum(r["record_type"] == "segment" for r in mine) == segments[n]
    damaged = {(r["broker_id"], r["topic"]) for r in rows if r["record_type"] == "segment" and r["finding_kinds"]}
    assert damaged == {(1, "plain"), (2, "txn")}
    summary = fleet.log("kafka_index_fleet", "fleet-a-1", "summary")
    assert "findings on broker 1 (" in summary and "broker 2 (" in summary.split("findings on", 1)[1], summary
    assert "broker 3 (bad_producer_snapshot)" in summary.split("findings on", 1)[1], summary
    assert "no rows from" not in summary, summary

    state = fleet.run("kafka_index_fleet", {"fleet_run_id": "fleet-a"}, "fleet-a-2")
    assert state == "failed"  # the same damage, the same verdict
    again = fleet.rows("fleet-a")
    assert sorted(map(str, again)) == sorted(map(str, rows))  # no row added, none changed


def test_an_unreachable_broker_fails_only_its_own_task_and_the_summary_names_it(fleet):
    fleet.stop_server(3)
    try:
        state = fleet.run("kafka_index_fleet", {"fleet_run_id": "fleet-c"}, "fleet-c-1")
    finally:
        fleet.start_server(3)
    tasks = {t: s for t, (s, _, _) in fleet.tasks("kafka_index_fleet", "fleet-c-1").items()}
    assert state == "failed"
    assert (tasks["verify_broker[0]"], tasks["verify_broker[1]"], tasks["verify_broker[2]"]) == (
        "success",
        "success",
        "failed",
    )
    assert tasks["summary"] == "failed"
    summary = fleet.log("kafka_index_fleet", "fleet-c-1", "summary")
    assert "no rows from broker 3 (127.0.0.13)" in summary, summary
    assert {r["broker_id"] for r in fleet.rows("fleet-c")} == {1, 2}


def calls(fleet: Fleet) -> list[tuple[str, int, float]]:
    if not fleet.calls.exists():
        return []
    return [(s, int(b), float(t)) for s, b, t in (line.split() for line in fleet.calls.read_text().splitlines())]


def test_rolling_repair_one_broker_at_a_time(fleet):
    """A dry run changes nothing and calls no stop or start; then the roll: stop, repair, start and the health
    check for each broker in turn, the damage repaired; a failing start stops the roll where it failed."""
    before = {n: index_files(d) for n, d in fleet.brokers.items()}
    state = fleet.run("kafka_index_rolling_repair", {}, "roll-dry")
    log = fleet.log("kafka_index_rolling_repair", "roll-dry", "roll")
    assert state == "success", log
    assert calls(fleet) == [] and {n: index_files(d) for n, d in fleet.brokers.items()} == before
    assert "would_repair" in log or "would repair" in log, log

    state = fleet.run("kafka_index_rolling_repair", {"dry_run": False, "sync": "fsync"}, "roll-1")
    log = fleet.log("kafka_index_rolling_repair", "roll-1", "roll")
    assert state == "success", log
    repaired = [r for r in fleet.rows("rolling-roll-1") if r["record_type"] == "segment" and r["action"] == "repaired"]
    assert repaired and {json.loads(str(r["settings_json"]))["sync"] for r in repaired} == {"fsync"}  # the form's
    got = calls(fleet)
    assert [(s, b) for s, b, _ in got] == [(s, b) for b in (1, 2, 3) for s in ("stop", "start", "healthy")]
    assert [t for _, _, t in got] == sorted(t for _, _, t in got)
    assert (fleet.brokers[1] / "plain-0" / "00000000000000000000.index").exists()  # repaired
    assert os.path.getsize(fleet.brokers[2] / "txn-0" / "00000000000000000000.timeindex") > 5
    assert index_files(fleet.brokers[3]) == before[3]  # nothing to repair there
    assert list((fleet.root / "backups-2").rglob("*.timeindex"))  # the old file kept on broker 2's own disk

    fleet.calls.unlink()
    (fleet.root / "fail-start-2").touch()
    state = fleet.run("kafka_index_rolling_repair", {"dry_run": False}, "roll-2")
    log = fleet.log("kafka_index_rolling_repair", "roll-2", "roll")
    assert state == "failed"
    assert [(s, b) for s, b, _ in calls(fleet)] == [
        ("stop", 1), ("start", 1), ("healthy", 1), ("stop", 2), ("start", 2)
    ]  # fmt: skip
    assert "rolling repair stopped at broker 2 (127.0.0.12) (left stopped), step start: start: exit 7" in log, log
    assert "not touched: [3]" in log
