"""Plain main_fn's (no TensorFlow) used by the Spark tests; shipped to nodes by value."""

import json
import os
import signal
import socket
import subprocess
import sys
import time


def describe(args, ctx):
    """Everything a node knows about itself, as plain data."""
    return {
        "name": ctx.name,
        "job": ctx.job_name,
        "index": ctx.task_index,
        "rank": ctx.rank,
        "is_chief": ctx.is_chief,
        "num_workers": ctx.num_workers,
        "cluster_spec": ctx.cluster_spec,
        "tf_config": json.loads(os.environ["TF_CONFIG"]),
        "host": ctx.host,
        "port": ctx.port,
        "pid": os.getpid(),
        "args": args,
        "intra": os.environ.get("TF_NUM_INTRAOP_THREADS"),
        "inter": os.environ.get("TF_NUM_INTEROP_THREADS"),
        "num_cpus": ctx.num_cpus,
    }


def describe_ctx_only(ctx):
    return {"name": ctx.name, "tf_config": json.loads(os.environ["TF_CONFIG"])}


def chatty(args, ctx):
    for i in range(3):
        print(f"line {i} from {ctx.name}", flush=True)
    print(f"an error line from {ctx.name}", file=sys.stderr, flush=True)
    return ctx.name


def port_is_held(args, ctx):
    """A plain bind to this node's published port must fail while the node runs."""
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", ctx.port))
            return {"port": ctx.port, "held": False}
        except OSError as exc:
            return {"port": ctx.port, "held": True, "errno": exc.errno}


def raise_on(args, ctx):
    """Raise ``args['exc']`` on node ``args['node']``; every other node waits."""
    if ctx.name == args["node"]:
        print(f"about to fail on {ctx.name}", flush=True)
        time.sleep(args.get("delay", 0))
        raise ValueError(args["message"])
    time.sleep(args.get("others_sleep", 120))
    return "should have been stopped"


def sigkill_self_on(args, ctx):
    if ctx.name == args["node"]:
        print("dying now", flush=True)
        time.sleep(args.get("delay", 0))
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(120)


def unpicklable_result(args, ctx):
    import threading

    return threading.Lock()


def result_of_a_class_only_the_node_has(args, ctx):
    """Returns an instance of a class from a module only this process has on its path (as
    a class shipped to the executors alone, with --py-files, would be)."""
    import importlib

    folder = os.path.join(ctx.work_dir, "private")
    os.makedirs(folder)
    with open(os.path.join(folder, "node_only_results.py"), "w") as f:
        f.write("class Score:\n    def __init__(self, v):\n        self.v = v\n")
    sys.path.insert(0, folder)
    return importlib.import_module("node_only_results").Score(0.5)


def spawn_tree_and_wait(args, ctx):
    """Start a grandchild in its own session, record the pids, then wait to be killed."""
    grandchild = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True
    )
    record = {
        "node": os.getpid(),
        "grandchild": grandchild.pid,
        "supervisor": os.getppid(),
        "task_worker": _parent_of(os.getppid()),
    }
    path = os.path.join(args["dir"], ctx.name.replace(":", "_") + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump(record, f)
    os.replace(path + ".tmp", path)
    time.sleep(300)


def _parent_of(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def serve_then_return(args, ctx):
    """Workers serve until the chief returns (the TF2 ParameterServerStrategy shape)."""
    if ctx.job_name == "worker":
        ctx.serve()
        return "served"
    time.sleep(args.get("chief_secs", 1))
    return "chief done"


def evaluator_waits(args, ctx):
    if ctx.job_name == "evaluator":
        ok = ctx.wait_for_training_done(timeout=60)
        return {"saw_training_done": ok}
    time.sleep(args.get("secs", 0.5))
    return ctx.name


def sleep_forever(args, ctx):
    time.sleep(600)


def chief_sleeps_forever(args, ctx):
    """The chief never returns; every other node returns at once."""
    if ctx.is_chief:
        time.sleep(600)


def wait_for_file(args, ctx):
    """Return once args["file"] exists (the test's signal), reporting ctx.log_dir."""
    deadline = time.monotonic() + args.get("timeout", 120)
    while not os.path.exists(args["file"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    return {"log_dir": ctx.log_dir}


def checkpointed_steps(args, ctx):
    """The chief counts to args["steps"] in a real TF checkpoint (saved every 5 steps in
    args["dir"]), resuming from it; on attempt 0, worker:0 SIGKILLs itself once step 10 is saved."""
    import signal

    import tensorflow as tf

    if ctx.job_name == "worker":
        if ctx.attempt == 0:
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                latest = tf.train.latest_checkpoint(args["dir"])
                if latest and int(latest.rsplit("-", 1)[1]) >= 10:
                    os.kill(os.getpid(), signal.SIGKILL)
                time.sleep(0.02)
        return {"attempt": ctx.attempt}
    step = tf.Variable(0, dtype=tf.int64)
    ckpt = tf.train.Checkpoint(step=step)
    manager = tf.train.CheckpointManager(ckpt, args["dir"], max_to_keep=2)
    if manager.latest_checkpoint:
        ckpt.restore(manager.latest_checkpoint)
    start = int(step.numpy())
    while int(step.numpy()) < args["steps"]:
        step.assign_add(1)
        time.sleep(0.05)
        if int(step.numpy()) % 5 == 0:
            manager.save(checkpoint_number=int(step.numpy()))
    return {"attempt": ctx.attempt, "resumed_from": start, "final_step": int(step.numpy())}


def sum_feed_dying_once(args, ctx):
    """Sum the fed ids; on attempt 0, worker:0 SIGKILLs itself after its first batch."""
    import signal

    feed = ctx.get_data_feed()
    total, rows = 0, 0
    while not feed.should_stop():
        batch = feed.next_batch(10)
        total, rows = total + sum(batch), rows + len(batch)
        if ctx.attempt == 0 and ctx.name == "worker:0":
            os.kill(os.getpid(), signal.SIGKILL)
    return {"attempt": ctx.attempt, "sum": total, "rows": rows}


def steady_training(args, ctx):
    """'Train' step by step (reporting progress; from the feed in InputMode.SPARK) until
    stopped; args: "raise"/"raise_after" make a node raise, "hang"/"hang_after" make one hang."""
    import json

    path = os.path.join(args["dir"], ctx.name.replace(":", "_") + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump(
            {
                "node": os.getpid(),
                "supervisor": os.getppid(),
                "port": ctx.port,
                "cluster": ctx.cluster_spec,
            },
            f,
        )
    os.replace(path + ".tmp", path)
    feed = ctx.get_data_feed() if ctx.train_mode else None
    start, step = time.monotonic(), 0
    while feed is None or not feed.should_stop():
        if feed is not None:
            feed.next_batch(1)
        step += 1
        ctx.report_progress(step)
        elapsed = time.monotonic() - start
        if ctx.name == args.get("raise") and elapsed >= args.get("raise_after", 0):
            print(f"raising at {time.time():.3f}", flush=True)
            raise RuntimeError("the chief gave up")
        if ctx.name == args.get("hang") and elapsed >= args.get("hang_after", 0):
            print(f"hanging at {time.time():.3f}", flush=True)
            time.sleep(3600)  # alive, heartbeats going, no progress
        time.sleep(0.05)
    return step


def describe_env(args, ctx):
    """The node's TF_CONFIG and its whole environment."""
    return {"tf_config": ctx.tf_config, "env": dict(os.environ)}


def evaluate_after_training(args, ctx):
    """The evaluator keeps 'evaluating' for args["eval_secs"] after training has ended."""
    if ctx.job_name == "evaluator":
        ctx.wait_for_training_done(timeout=120)
        end = time.monotonic() + args["eval_secs"]
        while time.monotonic() < end:
            time.sleep(0.1)
        return {"evaluated_after_training": True}
    time.sleep(args.get("train_secs", 0.5))
    return ctx.name


def big_result(args, ctx):
    """The chief returns args["mb"] MB; every node returns at once."""
    if ctx.is_chief:
        return b"x" * (args["mb"] << 20)
    return ctx.name


def die_with_a_child_holding_the_pipes(args, ctx):
    """worker:0 starts a child that inherits its stdout/stderr, records it, and is SIGKILLed."""
    if ctx.name != "worker:0":
        time.sleep(120)
        return ctx.name
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    path = os.path.join(args["dir"], "child.json")
    with open(path + ".tmp", "w") as f:
        json.dump({"child": child.pid, "killed_at": time.time()}, f)
    os.replace(path + ".tmp", path)
    print("killing myself", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


def raise_on_attempt_zero(args, ctx):
    """worker:0 raises on attempt 0 after args["delay"]; every later attempt would succeed."""
    if ctx.attempt == 0 and ctx.name == "worker:0":
        time.sleep(args.get("delay", 1))
        raise RuntimeError("attempt 0 fails")
    time.sleep(args.get("secs", 1))
    return {"attempt": ctx.attempt}


def steady_unless_restarted(args, ctx):
    """Attempt 0: jobs.steady_training (runs until stopped); later attempts return at once."""
    if ctx.attempt == 0:
        return steady_training(args, ctx)
    time.sleep(0.5)
    return {"attempt": ctx.attempt}


def imports_tensorflow(args, ctx):
    """TensorFlow's native start-up lines, then the user's own line."""
    import tensorflow as tf

    tf.constant(1).numpy()
    print(f"user line from {ctx.name}", flush=True)
    return True


def reports(args, ctx):
    """Steps and a metric to the driver, a few heartbeats apart."""
    import time

    for step in range(1, args.get("steps", 5) + 1):
        ctx.report(step=step, loss=1.0 / step)
        time.sleep(args.get("pause", 0.3))
    if args.get("bad"):
        ctx.report(step="seven")
    return True


def reports_tensors(args, ctx):
    """A custom TF2 loop's report: the step as ``optimizer.iterations`` (an int64 variable),
    the loss an eager tensor, a numpy metric; then report_progress with a tensor."""
    import numpy as np
    import tensorflow as tf

    opt = tf.keras.optimizers.SGD(0.1)
    w = tf.Variable(3.0)
    for _ in range(3):
        with tf.GradientTape() as tape:
            loss = w * w
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        ctx.report(step=opt.iterations, loss=loss, lr=np.float32(0.1), w=w)
    ctx.report_progress(tf.constant(4, tf.int64))
    said = None
    try:
        ctx.report(loss=tf.constant([1.0, 2.0]))
    except TypeError as exc:
        said = str(exc)
    time.sleep(1.5)  # one heartbeat carries it
    return said


def describe_gpus(args, ctx):
    """The GPUs this node was given, as ctx and the environment say."""
    import os

    return {
        "gpus": list(ctx.gpus),
        "env": os.environ.get("CUDA_VISIBLE_DEVICES"),
        "job": ctx.job_name,
    }


def describe_processes(args, ctx):
    """This TF process, its supervisor and their barrier task: names, the TCP peers each holds,
    and whether numpy was already imported when main_fn started."""
    numpy_at_start = "numpy" in sys.modules
    import psutil

    me = psutil.Process()
    sup = me.parent()

    def peers(proc):
        return sorted({c.raddr.port for c in proc.net_connections("tcp") if c.raddr})

    return {
        "name": me.name(),
        "supervisor": sup.name(),
        "supervisor_cmdline": sup.cmdline(),
        "node_peers": peers(me),
        "supervisor_peers": peers(sup),
        "worker_peers": peers(psutil.Process(sup.ppid())),
        "numpy_at_start": numpy_at_start,
    }


def exits(args, ctx):
    """Ends with ``sys.exit(args[name])`` (as ``absl.app.run`` does), else returns its name."""
    if ctx.name in args:
        sys.exit(args[ctx.name])
    return ctx.name


def ctx_misuse(args, ctx):
    """ctx's methods called with arguments of the wrong type: what each raised."""
    said = {}
    for name, call in (
        ("wait_for_training_done", lambda: ctx.wait_for_training_done("1")),
        ("report", lambda: ctx.report(step="x")),
        ("keras_callback", lambda: ctx.keras_callback(every_n_steps=0)),
    ):
        try:
            call()
            said[name] = None
        except TypeError as exc:
            said[name] = str(exc)
    return said


async def async_main(args, ctx):
    """A main_fn written with async def: run() refuses it (calling it would run nothing)."""
    return ctx.name


def worker_fails_its_first_process(args, ctx):
    """The ps serves; worker:0's first process raises (a marker in ``args["dir"]`` says it
    ran), its process restarted in place returns "restarted"; the chief waits (up to 120 s)
    for that second process's marker and returns whether it came."""
    if ctx.job_name == "ps":
        ctx.serve()
        return None
    first, second = (os.path.join(args["dir"], n) for n in ("first", "second"))
    if ctx.name == "worker:0":
        if not os.path.exists(first):
            open(first, "w").close()
            raise RuntimeError("worker:0's first process fails")
        open(second, "w").close()
        return "restarted"
    deadline = time.monotonic() + 120
    while not os.path.exists(second) and time.monotonic() < deadline:
        time.sleep(0.2)
    return os.path.exists(second)
