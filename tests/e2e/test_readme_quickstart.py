"""The README's quickstart, run as a user runs it: its Python block saved as quickstart.py and
its spark-submit command run in a shell, on local[2] (two nodes, real TF processes).

The docs' Getting started page shows the same code (tests/unit/test_docs.py keeps them equal).
"""

import os
import pathlib
import re
import subprocess
import sys
import uuid

import psutil
import pytest
from helpers.procs import wait_until

pytestmark = pytest.mark.slow

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def quickstart_blocks(text):
    """The Quickstart section's Python block and its shell command."""
    section = text.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    command = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip()
    return code, command


def marked(mark):
    """Live processes whose environment carries ``mark`` (everything the run started)."""
    found = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if (
                proc.environ().get("SPARKTF_QUICKSTART_TEST") == mark
                and proc.status() != psutil.STATUS_ZOMBIE
            ):
                found.append(proc.pid)
        except (psutil.Error, OSError):
            pass
    return found


def test_the_readme_quickstart_runs_as_written_and_learns_the_line(tmp_path, spark_pool):
    spark_pool.stop()  # the quickstart starts its own Spark in its own JVM
    import pyspark

    code, command = quickstart_blocks(README.read_text())
    assert len(code.splitlines()) <= 25, "keep the quickstart about 20 lines"
    assert "quickstart.py" in command
    (tmp_path / "quickstart.py").write_text(code)
    mark = uuid.uuid4().hex
    spark_bin = os.path.join(os.path.dirname(pyspark.__file__), "bin")
    env = dict(
        os.environ,
        PATH=spark_bin + os.pathsep + os.environ["PATH"],
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_DRIVER_PYTHON=sys.executable,
        SPARKTF_QUICKSTART_TEST=mark,
    )
    out = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=400
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "learned y = 3.0 * x + 1.0", out.stdout[-3000:]
    assert any(line.startswith(("[chief:0] ", "[sparktf] chief:0 ")) for line in lines), out.stdout[
        -3000:
    ]
    # nothing the run started outlives it: supervisors, TF processes, Spark's Python workers
    assert wait_until(lambda: not marked(mark), timeout=30), marked(mark)
