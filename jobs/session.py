"""The Spark session of a job: started quietly (the JVM's stderr filtered, py4j's logging kept off the root
logger), and a failed Spark job said in one line."""

from __future__ import annotations

import logging
import os
import sys
import threading
from typing import TYPE_CHECKING

from .config import Settings, conf_dir

if TYPE_CHECKING:
    from py4j.java_gateway import JavaGateway  # type: ignore[import-untyped]
    from pyspark import SparkConf
    from pyspark.sql import SparkSession


LOG4J_FILE = conf_dir() / "log4j2.properties"


def spark_session(settings: Settings, app_name: str) -> SparkSession:
    """The session: spark-submit's master when launched by it, else the configured one (``local[*]``). The JVM
    logs nothing below FATAL (a failed job is reported in one line by the run; ``-v`` sets WARN)."""
    from pyspark.sql import SparkSession

    _quiet_py4j()  # before the JVM starts: it may die while the session starts
    # PySpark's worker daemon, quiet when the JVM hangs up on an idle worker at the end (jobs.spark_daemon)
    builder = SparkSession.builder.appName(app_name).config("spark.python.daemon.module", "jobs.spark_daemon")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: embedded local Spark
        from pyspark import SparkConf, SparkContext

        # Python workers must run this interpreter (its packages), not whatever python3 is on PATH.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        conf = SparkConf().setAppName(app_name).setMaster(settings.spark_master)
        conf.set("spark.python.daemon.module", "jobs.spark_daemon")
        if LOG4J_FILE.exists():
            conf.set("spark.driver.extraJavaOptions", f"-Dlog4j.configurationFile={LOG4J_FILE}")
        for key, value in settings.spark_conf.items():
            conf.set(key, value)
        if SparkContext._active_spark_context is None:  # the JVM starts here, its stderr filtered
            SparkContext(conf=conf, gateway=_launch_jvm(conf))
        builder = builder.config(conf=conf)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("FATAL")
    _quiet_when_the_jvm_dies(spark)
    return spark


#: what Java 17 prints at every start of Spark 4's JVM, whose launcher always adds the incubating Vector API
#: module (no JVM option turns the notice off); :func:`_launch_jvm` drops it
JDK_NOTICE = b"WARNING: Using incubator modules: jdk.incubator.vector"


def _launch_jvm(conf: SparkConf) -> JavaGateway:
    """Start Spark's JVM as PySpark does (``launch_gateway``), its stderr through a pipe that a daemon thread
    copies line by line to ours, all but :data:`JDK_NOTICE`: the JVM's other lines (``-v``'s warnings, a
    FATAL) are printed as before. The thread reads from before the JVM starts, so a full pipe never blocks it."""
    from pyspark.java_gateway import launch_gateway

    read_end, write_end = os.pipe()
    threading.Thread(target=_copy_jvm_stderr, args=(read_end,), name="jvm-stderr", daemon=True).start()
    try:
        return launch_gateway(conf, popen_kwargs={"stderr": write_end})  # type: ignore[no-untyped-call]
    finally:
        os.close(write_end)  # the JVM holds its own copy: the thread ends when the JVM does


def _copy_jvm_stderr(read_end: int) -> None:
    with os.fdopen(read_end, "rb", buffering=0) as jvm_stderr:
        for line in iter(jvm_stderr.readline, b""):
            if line.rstrip(b"\r\n") != JDK_NOTICE:
                os.write(2, line)  # the process's stderr, where the JVM's own would go


def _not_from_py4j(record: logging.LogRecord) -> bool:
    return os.path.basename(os.path.dirname(record.pathname)) != "py4j"


def _quiet_py4j() -> None:
    """py4j logs every failed call to the JVM with its trace: through its own loggers (set to CRITICAL here),
    and in some paths (``GatewayClient.send_command``: a failed send, a KeyboardInterrupt while waiting)
    through the *root* logger, whose first use installs a stderr handler (``logging.basicConfig``). When the
    JVM dies those traces would come before the run's one line, at moments that depend on when Python
    collects its Java objects. A filter on the root logger drops py4j's records (only records logged on the
    root logger itself pass its filters); an empty root gets ``logging.lastResort`` as its handler, so a
    first root record no longer installs another and everything else prints as it did."""
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    root = logging.getLogger()
    if _not_from_py4j not in root.filters:
        root.addFilter(_not_from_py4j)
    if not root.handlers and logging.lastResort is not None:
        root.addHandler(logging.lastResort)


def _quiet_when_the_jvm_dies(spark: SparkSession) -> None:
    """If the JVM dies, the run reports it in one line (a Py4JError reaches ``run_job``), but PySpark's
    accumulator server thread prints an EOFError trace: quiet its error hook (PySpark's own object: no public
    setting reaches it; losing an accumulator update only slows the progress display)."""
    server = getattr(spark.sparkContext, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, client_address: None


def spark_failure(exc: BaseException) -> str:
    """The reason of a failed Spark job in one line (a Py4JJavaError's message is a Java stack trace)."""
    text = str(exc)
    for marker in ("Job aborted due to stage failure: ", "SparkException: "):
        if marker in text:
            text = text.split(marker, 1)[1]
            break
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(exc).__name__)
    return line if len(line) <= 300 else line[:297] + "..."


def java_hint() -> str:
    """Why Spark's JVM cannot start when the cause is plain, else "": no ``java`` on PATH and no ``JAVA_HOME``."""
    import shutil

    if os.environ.get("JAVA_HOME") or shutil.which("java"):
        return ""
    return " (no java on PATH and JAVA_HOME is not set: install Java 17 or 21, or run with --engine local, no JVM)"
