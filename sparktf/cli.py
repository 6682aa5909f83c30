"""The command line: ``python -m sparktf run [options] SCRIPT [ARG ...]`` (also installed as
``sparktf``) runs an existing script on every node of a new sparktf job, as
``sparktf.run(spark, SCRIPT, args=[ARG, ...])`` does.

It builds the SparkSession from the usual Spark settings: ``--master`` (or ``--remote
sc://HOST:PORT``, or ``SPARK_REMOTE``, for a Spark Connect server) and ``--conf KEY=VALUE``
as spark-submit takes them, then ``spark-defaults.conf`` (``SPARK_CONF_DIR``), then Spark's
defaults; ``spark.sparktf.*`` settings go through ``--conf`` too. A mistake of the user's
(a bad option, a script that fails) ends with one line saying what went wrong and a non-zero
exit status (2 for usage, 1 for the job); a traceback is shown only for a bug of sparktf's.

Runs on the driver.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from sparktf.common import scripts
from sparktf.common.horovod import FRAMEWORKS
from sparktf.errors import ConfigError, SparkTFError


def _pairs(values: list[str], what: str, parser: argparse.ArgumentParser) -> dict[str, str]:
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"{what} takes KEY=VALUE, got {item!r}")
        pairs[key] = value
    return pairs


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sparktf",
        description="Run distributed TensorFlow on Spark: an existing script on every node.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser(
        "run",
        help="run SCRIPT on every node, with TF_CONFIG set and sys.argv = [SCRIPT, ARG, ...]",
        description="Run SCRIPT on every node of a sparktf job (TF_CONFIG set, sys.argv as "
        "given). Options before SCRIPT are sparktf's; everything after it is the script's.",
    )
    where = r.add_mutually_exclusive_group()
    where.add_argument(
        "--master", help="Spark master URL (default: spark-defaults.conf, else local[*])"
    )
    where.add_argument(
        "--remote",
        metavar="sc://HOST:PORT",
        help="a Spark Connect server to run on instead (default: $SPARK_REMOTE, if set)",
    )
    r.add_argument("--name", help="application name (default: the script's file name)")
    r.add_argument(
        "--conf", action="append", default=[], metavar="KEY=VALUE", help="a Spark setting"
    )
    r.add_argument("--num-executors", type=int, help="nodes (default: every task slot)")
    r.add_argument("--num-ps", type=int, help="parameter servers among them (default: 0)")
    r.add_argument("--eval-node", action="store_true", help="make one node an evaluator")
    r.add_argument("--gpus-per-node", type=int, help="GPUs Spark assigns each node's task")
    r.add_argument(
        "--framework",
        choices=FRAMEWORKS,
        help="horovod: each node also gets its Horovod rank, size and rendezvous, so that "
        "the script's hvd.init() needs no horovodrun (default: tensorflow)",
    )
    r.add_argument(
        "--py-files", default="", metavar="A,B", help="comma-separated .py/.zip files to ship"
    )
    r.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="node environment"
    )
    r.add_argument("script", help="the Python script (a path on this machine)")
    r.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments, if any")
    p.set_defaults(run_parser=r)
    return p


def run(
    options: argparse.Namespace, script: scripts.Script, conf: dict[str, str], env: dict[str, str]
) -> int:
    """The job of a ``run`` command; its exit status."""
    from pyspark.sql import SparkSession

    import sparktf

    builder = SparkSession.builder.appName(options.name or os.path.basename(options.script))
    remote = options.remote or os.environ.get("SPARK_REMOTE")
    if remote:
        from sparktf.driver.sparkside import check_connect_server

        check_connect_server(remote)
        builder = builder.remote(remote) if options.remote else builder
    if options.master:
        builder = builder.master(options.master)
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    try:
        given = {
            "num_executors": options.num_executors,
            "num_ps": options.num_ps,
            "gpus_per_node": options.gpus_per_node,
            "framework": options.framework,
            "env": env or None,
        }
        cluster = sparktf.run(
            spark,
            script,
            eval_node=options.eval_node,
            **{k: v for k, v in given.items() if v is not None},
        )
        cluster.shutdown()
    finally:
        spark.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    options = parser().parse_args(argv)
    r = options.run_parser  # its errors say "sparktf run: error: ..."
    conf = _pairs(options.conf, "--conf", r)
    env = _pairs(options.env, "--env", r)
    if not os.path.isfile(options.script):
        r.error(f"no script at {options.script!r}")
    try:  # the script and what it ships, read before Spark starts
        script = scripts.from_path(
            options.script, options.args, [f for f in options.py_files.split(",") if f]
        )
    except ConfigError as exc:
        r.error(str(exc))
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(message)s")
    try:
        return run(options, script, conf, env)
    except SparkTFError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"sparktf: error: {type(exc).__name__}: {first}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("sparktf: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
