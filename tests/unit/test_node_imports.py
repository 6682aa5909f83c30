"""sparktf.node.patches.on_import: patches run on a module once it is imported, every one asked for."""

import sys

from sparktf.node.patches import on_import


def test_every_patch_asked_for_a_module_runs_once_it_is_imported(tmp_path, monkeypatch):
    (tmp_path / "sparktf_probe_module.py").write_text("value = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen = []
    on_import.after_import("sparktf_probe_module", lambda m: seen.append(("first", m.value)))
    on_import.after_import("sparktf_probe_module", lambda m: seen.append(("second", m.value)))
    assert seen == []  # not imported yet
    try:
        import sparktf_probe_module  # noqa: F401

        assert seen == [("first", 1), ("second", 1)]
        on_import.after_import("sparktf_probe_module", lambda m: seen.append(("now", m.value)))
        assert seen[-1] == ("now", 1)  # already imported: at once
    finally:
        sys.modules.pop("sparktf_probe_module", None)


def test_replace_everywhere_reaches_modules_holding_the_function_by_name():
    import types

    def old():
        return "old"

    def new():
        return "new"

    home, holder = types.ModuleType("sparktf_probe_home"), types.ModuleType("sparktf_probe_api")
    home.f = holder.f = old
    sys.modules.update({home.__name__: home, holder.__name__: holder})
    try:
        on_import.replace_everywhere(home, "f", new)
        assert home.f() == holder.f() == "new"
    finally:
        for name in (home.__name__, holder.__name__):
            sys.modules.pop(name, None)


def test_server_join_serves_until_stop_and_reports_only_from_main_fns_thread():
    """sparktf.node.join on a module shaped as TensorFlow's server_lib (TensorFlow itself:
    tests/spark/test_tf_models.py): join() in main_fn's thread reports the node serving; in
    a thread of main_fn's own it only waits, since main_fn still runs. Both end at stop."""
    import threading
    import types

    from sparktf.node.patches import join

    class Runtime:
        def __init__(self):
            self.stop, self.states = threading.Event(), []

        def report_state(self, state):
            self.states.append(state)

    class Server:
        def join(self):
            raise AssertionError("TensorFlow's own join blocks for ever")

    runtime = Runtime()
    # (private: the patch applied to a stand-in TF module, without importing TF)
    join._patch(types.SimpleNamespace(Server=Server), runtime)
    joined = threading.Thread(target=Server().join)
    joined.start()
    joined.join(0.2)
    assert joined.is_alive() and runtime.states == []  # waiting, nothing reported
    runtime.stop.set()
    joined.join(5)
    assert not joined.is_alive()
    Server().join()  # this (main) thread: reported, and returns at once (stop is set)
    assert runtime.states == ["serving"]
