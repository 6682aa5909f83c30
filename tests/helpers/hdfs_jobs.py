"""main_fn's that use HDFS from inside the TF process; shipped to nodes by value."""

import os


def count_fed_rows(args, ctx):
    """InputMode.SPARK: every row the feed hands this node (DataFrame or RDD)."""
    feed = ctx.get_data_feed(train_mode=True)
    rows = 0
    while not feed.should_stop():
        batch = feed.next_batch(64)
        rows += len(next(iter(batch.values()))) if isinstance(batch, dict) else len(batch)
    return {"rows": rows}


def read_own_files(args, ctx):
    """InputMode.TENSORFLOW: this node's share of the Parquet files (every num_workers-th),
    read through sparktf.fs; also where relative paths go, and the backend used."""
    import io

    import pyarrow.parquet as pq

    from sparktf import fs

    files = fs.list_files(args["path"])
    mine = files[ctx.rank :: ctx.num_workers]
    rows = sum(pq.read_table(io.BytesIO(fs.read_bytes(f))).num_rows for f in mine)
    return {
        "rows": rows,
        "files": len(mine),
        "backend": fs.backend(args["path"]).name,
        "absolute": ctx.absolute_path("mnist/model"),
        "absolute_root": ctx.absolute_path("/data"),
    }


def write_logs_and_checkpoint(args, ctx):
    """Writes into ctx.log_dir (local: sparktf mirrors it to the Hadoop log_dir) and, through a
    SyncedDir, a 'checkpoint' into the Hadoop model dir."""
    from sparktf import fs

    assert not fs.is_hadoop(ctx.log_dir), ctx.log_dir
    os.makedirs(os.path.join(ctx.log_dir, ctx.name.replace(":", "_")), exist_ok=True)
    with open(os.path.join(ctx.log_dir, ctx.name.replace(":", "_"), "events.out"), "w") as f:
        f.write(ctx.name)
    if ctx.is_chief:
        with fs.SyncedDir(args["model_dir"]) as local:
            with open(os.path.join(local, "checkpoint"), "w") as f:
                f.write('model_checkpoint_path: "ckpt-1"\n')
    return {"log_dir": ctx.log_dir}


def read_a_missing_file(args, ctx):
    from sparktf import fs

    return fs.read_bytes(args["path"])


def print_and_report(args, ctx):
    """Prints a line and reports a loss at steps 1-3 (the driver keeps both)."""
    print(f"hello from {ctx.name}", flush=True)
    for step in (1, 2, 3):
        ctx.report(step=step, loss=1.0 / step)
    return ctx.name
