import json
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

from streamcert.harness.stack.spark_checkpoints import checkpoint_file_manager

_NEW = "org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager"
_OLD = "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"
_DEFAULT = "org.apache.spark.sql.execution.streaming.checkpointing.FileContextBasedCheckpointFileManager"


def _jar(folder, name, classes):
    folder.mkdir(exist_ok=True)
    with zipfile.ZipFile(folder / name, "w") as archive:
        for cls in classes:
            archive.writestr(cls.replace(".", "/") + ".class", b"")
    return folder


def test_the_installed_pyspark_has_the_file_system_manager():
    assert checkpoint_file_manager() in (_NEW, _OLD)


def test_the_manager_is_found_under_either_package_and_none_when_absent(tmp_path):
    assert checkpoint_file_manager(_jar(tmp_path / "new", "spark-sql_2.13-4.3.0.jar", [_NEW])) == _NEW
    assert checkpoint_file_manager(_jar(tmp_path / "old", "spark-sql_2.13-4.0.1.jar", [_OLD])) == _OLD
    assert checkpoint_file_manager(_jar(tmp_path / "none", "spark-sql_2.13-9.0.0.jar", ["a.B"])) is None
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "spark-sql_2.13-4.3.0.jar").write_bytes(b"not a zip")
    assert checkpoint_file_manager(broken) is None


# Wrappers first on the driver's PATH: each logs its arguments, then runs the real command.
_WRAPPER = '#!/bin/sh\necho "$0 $*" >> {log}\nexec {real} "$@"\n'

_QUERY = textwrap.dedent("""
    import json, sys, time
    from streamcert.harness.stack.spark import SparkConfig, spark_session, stop_spark
    conf = json.loads(sys.argv[2])
    spark = spark_session(SparkConfig(master="local[1]", conf=conf, checkpoint_manager=sys.argv[3]))
    query = (spark.readStream.format("rate").option("rowsPerSecond", 10).load().writeStream.format("noop")
             .option("checkpointLocation", sys.argv[1]).trigger(processingTime="200 milliseconds").start())
    deadline = time.monotonic() + 90
    while (query.lastProgress or {}).get("batchId", -1) < 4 and time.monotonic() < deadline:
        time.sleep(0.1)
    query.stop()
    print(spark.conf.get("spark.sql.streaming.checkpointFileManagerClass", "None"))
    stop_spark(spark)
""")


@pytest.mark.integration
@pytest.mark.parametrize("manager", ["filesystem", "spark", "filesystem-overridden"])
def test_the_driver_writes_its_checkpoint_logs_without_starting_processes(tmp_path, manager):
    """Spark's default checkpoint manager starts ``readlink`` processes for every log file a batch writes (this test
    sees them with ``spark``, and when a session's own conf names that manager); ``filesystem`` starts none for the
    logs, and the logs are whole."""
    tools, log = tmp_path / "tools", tmp_path / "spawned.log"
    tools.mkdir()
    for name in ("readlink", "chmod"):
        real = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True, text=True).stdout.strip()
        (tools / name).write_text(_WRAPPER.format(log=log, real=real))
        (tools / name).chmod(0o755)
    checkpoint = tmp_path / "checkpoint"
    mode = manager.split("-")[0]
    conf = {"spark.sql.streaming.checkpointFileManagerClass": _DEFAULT} if manager.endswith("overridden") else {}
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    done = subprocess.run([sys.executable, "-c", _QUERY, str(checkpoint), json.dumps(conf), mode], env=env,
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    fast = manager == "filesystem"
    seen = done.stdout.strip().splitlines()[-1]
    assert seen == checkpoint_file_manager() if fast else seen in (_DEFAULT, "None")  # None: Spark's unset default
    commits = sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    assert commits[:5] == [0, 1, 2, 3, 4]
    spawned = log.read_text().splitlines() if log.exists() else []
    readlinks = [line for line in spawned if "readlink" in line and "/commits/" in line]
    if fast:
        assert readlinks == [], readlinks[:5]
    else:
        assert len(readlinks) >= 5, spawned[:10]


def test_the_switch_takes_two_names_and_a_certification_s_default_yields_to_a_set_variable(monkeypatch):
    from streamcert.harness.errors import ConfigurationError
    from streamcert.harness.stack import spark_checkpoints as switch

    monkeypatch.delenv(switch.SWITCH_VAR, raising=False)
    assert switch.checkpoint_manager_mode() == "spark"
    with switch.default_checkpoint_manager(switch.CERTIFICATION_CHECKPOINT_MANAGER) as mode:
        assert mode == "filesystem" and os.environ[switch.SWITCH_VAR] == "filesystem"
    assert switch.SWITCH_VAR not in os.environ
    monkeypatch.setenv(switch.SWITCH_VAR, " Spark ")
    assert switch.checkpoint_manager_mode() == "spark"
    with switch.default_checkpoint_manager(switch.CERTIFICATION_CHECKPOINT_MANAGER) as mode:
        assert mode == "spark"  # what the user set wins, and is what the results record
    monkeypatch.setenv(switch.SWITCH_VAR, "hdfs")
    with pytest.raises(ConfigurationError, match="neither filesystem nor spark"):
        switch.checkpoint_manager_mode()
