"""A secure cluster's delegation tokens, relayed from the driver to the job's TF processes.

On a Kerberos cluster a YARN container starts with the tokens of its application
(``HADOOP_TOKEN_FILE_LOCATION``), and YARN renews them only up to their maximum lifetime
(``dfs.namenode.delegation.token.max-lifetime``, 7 days by default). Spark, given
``--principal``/``--keytab`` (or ``spark.kerberos.renewal.credentials=ccache``), obtains new
tokens before then and hands them to its executors' JVMs, but not to the processes those
start: the TF nodes would keep reading the container's first tokens and lose HDFS when they
end. Spark also adds every new set to the driver JVM's current user
(``SparkHadoopUtil.addDelegationTokens``), so the driver reads them there
(:func:`sparktf.driver.sparkfacts.driver_tokens`), and the runner sends them to every node as it connects and again
whenever they change (:class:`TokenRelay`, the ``tokens`` message). The node writes them to a
file of its own and points ``HADOOP_TOKEN_FILE_LOCATION`` at it
(:func:`sparktf.fs.tokens.install`); its WebHDFS clients remake themselves with them.
"""

from __future__ import annotations

import logging
import time

from sparktf.driver.sparkfacts import driver_tokens

log = logging.getLogger(__name__)

#: How often (seconds) the driver looks for new tokens: one py4j call. Spark obtains new
#: ones at 75 % of their renew interval (a day by default) and they die at its end, so the
#: nodes have the last quarter of it to get them.
POLL_SECS = 2.0


class TokenRelay:
    """The tokens the driver last read, and whether they changed since (:meth:`poll`)."""

    def __init__(self, sc, poll_secs: float = POLL_SECS) -> None:
        self._sc = sc
        self._poll_secs = poll_secs
        self._next = 0.0
        #: The tokens as last read (None: none, or not a secure cluster).
        self.tokens: bytes | None = None
        # Off for good where the first read finds no security: nothing to relay, no polls.
        self._off = False

    def poll(self, now: float | None = None) -> bytes | None:
        """The driver's tokens if they changed since the last poll that read them (at most
        one read every ``poll_secs``), else None."""
        now = time.monotonic() if now is None else now
        if self._off or now < self._next:
            return None
        self._next = now + self._poll_secs
        fresh = driver_tokens(self._sc)
        if fresh is None:
            self._off = self.tokens is None
            return None
        if fresh == self.tokens:
            return None
        if self.tokens is not None:
            log.info("sparktf: new delegation tokens on the driver: relayed to the nodes")
        self.tokens = fresh
        return fresh
