"""A KDC and secure HDFS and YARN settings for ``bin/yarn-test-cluster.sh start --kerberos``.

MIT Kerberos (Debian's ``krb5-kdc``, ``krb5-admin-server`` and ``krb5-user``: ``krb5kdc``,
``kdb5_util``, ``kadmin.local``, ``kinit``) runs a KDC for the realm ``SPARKTF.TEST`` on a free
loopback port, its database, stash, configuration and keytabs in ``STATE/krb5`` (nothing in
``/etc``). Principals:

- ``hdfs/localhost``, ``yarn/localhost``, ``HTTP/localhost`` and ``HTTP/127.0.0.1`` (the
  daemons and SPNEGO for WebHDFS), in ``STATE/krb5/service.keytab``;
- ``sparktf`` (the user), in ``STATE/krb5/sparktf.keytab``: ``PRINCIPAL`` and ``KEYTAB``.

Every daemon runs with ``hadoop.security.authentication=kerberos``, service-level
authorization, block access tokens, SASL on the data transfer protocol
(``dfs.data.transfer.protection=authentication``; ``ignore.secure.ports.for.testing`` instead of
jsvc and privileged ports), SPNEGO on WebHDFS and delegation tokens that must be renewed every
10 minutes and live at most 30. The JVMs read the KDC's address from
``-Djava.security.krb5.conf`` (Java ignores ``KRB5_CONFIG``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time

REALM = "SPARKTF.TEST"
USER = "sparktf"
#: HTTP/127.0.0.1 too: a SPNEGO client names the service by the URL's host (a WebHDFS URL
#: on 127.0.0.1), where Java's resolves it to localhost
SERVICES = ("hdfs/localhost", "yarn/localhost", "HTTP/localhost", "HTTP/127.0.0.1")
TOOLS = ("krb5kdc", "kdb5_util", "kadmin.local", "kinit")
#: Delegation tokens' maximum lifetime (s) unless SPARKTF_TOKEN_LIFETIME says: short, so that
#: a job can outlive its tokens (the kerberos tier starts its cluster with 60 s); the renew
#: interval is half of it
TOKEN_LIFETIME_SECS = 30 * 60


#: The realm's allowed clock skew (s) unless SPARKTF_CLOCK_SKEW says: Kerberos's usual 300 s,
#: within which an expired ticket is still accepted (the kerberos tier uses 10 s, so that a
#: ticket is refused seconds after its end, not five minutes)
CLOCK_SKEW_SECS = 300


def _seconds(name: str, default: int, least: int, why: str = "") -> int:
    """The environment variable ``name`` in seconds (``default`` where unset), at least
    ``least``."""
    secs = int(os.environ.get(name) or default)
    if secs < least:
        raise SystemExit(f"{name}={secs}: at least {least} s{why}")
    return secs


def clock_skew() -> int:
    return _seconds("SPARKTF_CLOCK_SKEW", CLOCK_SKEW_SECS, 1)


def token_times() -> tuple[str, str]:
    """(renew interval, maximum lifetime) of every delegation token, in ms, as site values."""
    secs = _seconds("SPARKTF_TOKEN_LIFETIME", TOKEN_LIFETIME_SECS, 10, " (Spark renews at 75 %)")
    return str(secs * 500), str(secs * 1000)


def tool(name: str) -> str | None:
    """An MIT Kerberos program (the admin ones are in /usr/sbin, often not on a user's PATH)."""
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/sbin")


def missing() -> str | None:
    """Why no KDC can run here (None when it can)."""
    absent = [t for t in TOOLS if not tool(t)]
    if absent:
        return (
            f"no {', '.join(absent)}: install MIT Kerberos (as root: apt-get install "
            "krb5-kdc krb5-admin-server krb5-user)"
        )
    return None


def kdir(state: str) -> str:
    return os.path.join(state, "krb5")


def principal(name: str) -> str:
    return f"{name}@{REALM}"


def env(state: str) -> dict:
    """The MIT tools' environment: this KDC's krb5.conf and kdc.conf."""
    d = kdir(state)
    return dict(
        os.environ,
        KRB5_CONFIG=os.path.join(d, "krb5.conf"),
        KRB5_KDC_PROFILE=os.path.join(d, "kdc.conf"),
    )


def write_conf(state: str, port: int) -> None:
    d = kdir(state)
    with open(os.path.join(d, "krb5.conf"), "w") as f:
        f.write(
            f"[libdefaults]\n default_realm = {REALM}\n dns_lookup_kdc = false\n"
            " dns_lookup_realm = false\n rdns = false\n dns_canonicalize_hostname = false\n"
            # TCP (Java and MIT alike): no UDP retries on a loaded machine
            " udp_preference_limit = 1\n forwardable = true\n ticket_lifetime = 24h\n"
            f" renew_lifetime = 7d\n clockskew = {clock_skew()}\n"
            f"[realms]\n {REALM} = {{\n  kdc = 127.0.0.1:{port}\n }}\n"
            f"[domain_realm]\n localhost = {REALM}\n 127.0.0.1 = {REALM}\n"
        )
    with open(os.path.join(d, "kdc.conf"), "w") as f:
        f.write(
            f"[kdcdefaults]\n kdc_listen = 127.0.0.1:{port}\n kdc_tcp_listen = 127.0.0.1:{port}\n"
            f"[realms]\n {REALM} = {{\n"
            f"  database_name = {d}/principal\n  key_stash_file = {d}/stash\n"
            f"  acl_file = {d}/kadm5.acl\n  max_life = 24h\n  max_renewable_life = 7d\n"
            "  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal\n"
            f" }}\n[logging]\n kdc = FILE:{d}/kdc-events.log\n"
        )


def _run(state: str, *cmd: str) -> None:
    out = subprocess.run(cmd, env=env(state), capture_output=True, text=True, timeout=60)
    if out.returncode:
        raise RuntimeError(f"{' '.join(cmd)} failed: {(out.stdout + out.stderr)[-1500:]}")


def start_kdc(state: str, launch) -> subprocess.Popen:
    """The realm's database, principals and keytabs, and the KDC (``launch(argv, name)``
    starts it as a daemon of the cluster: its PID file, stopped by ``stop``)."""
    import hdfs_test_cluster as hadoop

    d = kdir(state)
    os.makedirs(d, mode=0o700)
    port = hadoop.free_port()
    write_conf(state, port)
    _run(state, tool("kdb5_util"), "create", "-s", "-r", REALM, "-P", os.urandom(12).hex())
    kadmin = tool("kadmin.local")
    for name in (*SERVICES, USER):
        _run(state, kadmin, "-r", REALM, "-q", f"addprinc -randkey {principal(name)}")
    _run(state, kadmin, "-r", REALM, "-q", f"ktadd -k {d}/service.keytab " + " ".join(SERVICES))
    _run(state, kadmin, "-r", REALM, "-q", f"ktadd -k {d}/{USER}.keytab {USER}")
    kdc = launch([tool("krb5kdc"), "-n", "-r", REALM, "-d", f"{d}/principal"], "kdc")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and kdc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return kdc
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"krb5kdc did not listen on 127.0.0.1:{port} (exit code {kdc.poll()})")


def kinit(state: str, name: str, keytab: str, cache: str) -> None:
    """A ticket for ``name`` from ``keytab`` into the credentials cache file ``cache``."""
    _run(state, tool("kinit"), "-kt", keytab, "-c", cache, principal(name))


def jvm_opts(state: str) -> list[str]:
    return [f"-Djava.security.krb5.conf={os.path.join(kdir(state), 'krb5.conf')}"]


def site_props(state: str) -> dict[str, dict]:
    """What each Hadoop site file adds for security (hdfs_test_cluster.EXTRA_SITE)."""
    keytab = os.path.join(kdir(state), "service.keytab")
    hdfs, yarn, http = (principal(s) for s in SERVICES[:3])
    renew_ms, max_ms = token_times()
    return {
        "core-site.xml": {
            "hadoop.security.authentication": "kerberos",
            "hadoop.security.authorization": "true",
            # hdfs/localhost@SPARKTF.TEST -> hdfs, sparktf@SPARKTF.TEST -> sparktf
            "hadoop.security.auth_to_local": "DEFAULT",
            # SPNEGO on HDFS's web servers (WebHDFS's filter reads these, not dfs.web.*);
            # /jmx stays open: the start-up check reads it
            "hadoop.http.authentication.type": "kerberos",
            "hadoop.http.authentication.kerberos.principal": "*",  # every HTTP/ of the keytab
            "hadoop.http.authentication.kerberos.keytab": keytab,
            "hadoop.http.authentication.kerberos.endpoint.whitelist": "/jmx",
        },
        "hdfs-site.xml": {
            "dfs.block.access.token.enable": "true",
            "dfs.namenode.kerberos.principal": hdfs,
            "dfs.namenode.keytab.file": keytab,
            "dfs.datanode.kerberos.principal": hdfs,
            "dfs.datanode.keytab.file": keytab,
            "dfs.namenode.kerberos.internal.spnego.principal": http,
            "dfs.web.authentication.kerberos.principal": http,
            "dfs.web.authentication.kerberos.keytab": keytab,
            "dfs.data.transfer.protection": "authentication",
            # Hadoop's own test switch: a secure DataNode without jsvc and privileged ports
            "ignore.secure.ports.for.testing": "true",
            "dfs.namenode.delegation.token.renew-interval": renew_ms,
            "dfs.namenode.delegation.token.max-lifetime": max_ms,
        },
        "yarn-site.xml": {
            "yarn.resourcemanager.principal": yarn,
            "yarn.resourcemanager.keytab": keytab,
            "yarn.nodemanager.principal": yarn,
            "yarn.nodemanager.keytab": keytab,
            "yarn.resourcemanager.delegation.token.renew-interval": renew_ms,
            "yarn.resourcemanager.delegation.token.max-lifetime": max_ms,
            # YARN's web servers (REST: the start-up check, the tests) stay without SPNEGO
            "hadoop.http.authentication.type": "simple",
            # a secure NodeManager aggregates logs through SecureIOUtils, which needs Hadoop's
            # native libhadoop.so (not in Maven's jars): without it the NodeManager exits at
            # the end of the first application ("Secure IO is not possible without native
            # code extensions"). Logs stay in STATE/nm/logs/APP/CONTAINER/
            "yarn.log-aggregation-enable": "false",
        },
    }


def describe(state: str) -> list[str]:
    """The lines ``start --kerberos`` prints before ``HADOOP_CONF_DIR=``."""
    d = kdir(state)
    return [
        f"KRB5_CONFIG={os.path.join(d, 'krb5.conf')}",
        f"PRINCIPAL={principal(USER)}",
        f"KEYTAB={os.path.join(d, USER + '.keytab')}",
    ]


if __name__ == "__main__":
    print(missing() or "MIT Kerberos is installed", file=sys.stderr)
