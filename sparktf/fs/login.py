"""The driver's own Kerberos login from the keytab it was submitted with.

``spark-submit --principal P --keytab K`` logs in Spark's JVM alone: the driver's Python, whose
``sparktf.fs`` calls reach HDFS through their own client (libhdfs's JVM, WebHDFS with SPNEGO),
has no ticket unless the user ran ``kinit``. Where Hadoop uses Kerberos, this process was
handed no delegation token, it has no valid ticket, and the active SparkContext's conf names a
principal and a keytab (``spark.kerberos.principal`` / ``spark.kerberos.keytab``, or their
``spark.yarn.*`` names), :func:`ensure_ticket` runs MIT's ``kinit`` from that keytab into a
credentials cache of this process's own (a 0600 file, removed at exit) and points
``KRB5CCNAME`` at it, before the first backend connects.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading

from sparktf.fs.paths import HadoopFSError, uses_kerberos

_LOCK = threading.Lock()
_done = False


def spark_keytab() -> tuple[str, str] | None:
    """(principal, keytab) from the active SparkContext's conf (spark-submit's --principal and
    --keytab), if this process has one and both are set; None otherwise."""
    if "pyspark" not in sys.modules:
        return None
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context  # (no public getter that creates none)
    if sc is None:
        return None
    conf = sc.getConf()
    principal = conf.get("spark.kerberos.principal") or conf.get("spark.yarn.principal")
    keytab = conf.get("spark.kerberos.keytab") or conf.get("spark.yarn.keytab")
    return (principal, keytab) if principal and keytab else None


def _has_ticket() -> bool:
    """Whether the credentials cache this process uses holds a valid ticket (``klist -s``);
    True where ``klist`` is missing (nothing can be checked, nothing is done)."""
    klist = shutil.which("klist")
    if klist is None:
        return True
    return subprocess.run([klist, "-s"], capture_output=True, timeout=30).returncode == 0


def ensure_ticket() -> str | None:
    """Log this process in from its Spark keytab where it needs to (see the module's
    docstring); once a process. Returns the credentials cache made, or None."""
    global _done
    with _LOCK:
        if _done:
            return None
        _done = True
        if os.environ.get("HADOOP_TOKEN_FILE_LOCATION") or not uses_kerberos():
            return None  # (a YARN container's tokens, or no Kerberos at all)
        found = spark_keytab()
        kinit = shutil.which("kinit")
        if found is None or kinit is None or _has_ticket():
            return None
        principal, keytab = found
        fd, cache = tempfile.mkstemp(prefix="krb5cc_sparktf_")
        os.close(fd)
        out = subprocess.run(
            [kinit, "-kt", keytab, "-c", cache, principal],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode != 0:
            os.unlink(cache)
            raise HadoopFSError(
                f"the driver has no Kerberos ticket, and kinit from the keytab it was "
                f"submitted with failed (kinit -kt {keytab} {principal}: "
                f"{(out.stderr or out.stdout).strip()}); check --principal/--keytab, or run "
                "kinit before spark-submit"
            )
        os.environ["KRB5CCNAME"] = "FILE:" + cache
        atexit.register(_remove, cache)
        return cache


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
