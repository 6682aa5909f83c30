"""A script as a node runs it (sparktf.common.scripts), and the checks on what run() is given,
without Spark: the Script value is called here as a node calls it."""

import os
import pickle
import sys
import zipfile
from types import SimpleNamespace

import pytest

import sparktf
from sparktf import cli
from sparktf.common import scripts


def write(path, text):
    path.write_text(text)
    return str(path)


def test_a_script_runs_as_main_with_its_argv_and_files(tmp_path):
    out = tmp_path / "out.txt"
    script = write(
        tmp_path / "train.py",
        "import sys, helper, zipped\n"
        "if __name__ == '__main__':\n"
        "    open(sys.argv[2], 'w').write(repr([sys.argv[0].endswith('train.py'), sys.argv[1:],"
        " helper.VALUE, zipped.VALUE]))\n",
    )
    helper = write(tmp_path / "helper.py", "VALUE = 41\n")
    with zipfile.ZipFile(tmp_path / "lib.zip", "w") as z:
        z.writestr("zipped.py", "VALUE = 42\n")
    value = scripts.from_path(
        script, ["--out", str(out)], py_files=[helper, str(tmp_path / "lib.zip")]
    )
    value = pickle.loads(pickle.dumps(value))  # what crosses to the node
    work = tmp_path / "node"
    work.mkdir()
    argv, path = list(sys.argv), list(sys.path)
    assert value(SimpleNamespace(work_dir=str(work))) is None
    assert eval(out.read_text()) == [True, ["--out", str(out)], 41, 42]
    assert sys.argv == argv and sys.path == path  # restored for what follows in the node
    (folder,) = os.listdir(work)
    assert oct(os.stat(work / folder / "train.py").st_mode & 0o777) == "0o600"
    assert "train.py" in repr(value) and "VALUE" not in repr(value)


def test_a_scripts_exit_code_is_the_nodes_outcome(tmp_path):
    script = write(tmp_path / "fails.py", "import sys\nsys.exit(int(sys.argv[1]))\n")
    with pytest.raises(scripts.ScriptExit) as info:
        scripts.from_path(script, ["3"])(SimpleNamespace(work_dir=str(tmp_path)))
    assert info.value.code == 3 and isinstance(info.value, SystemExit)
    assert scripts.from_path(script, ["0"])(SimpleNamespace(work_dir=str(tmp_path))) is None


@pytest.mark.parametrize(
    "args, py_files, error, words",
    [
        ("--epochs 3", None, sparktf.ConfigTypeError, "list of strings"),
        (["--epochs", 3], None, sparktf.ConfigTypeError, "[3]"),
        ({"epochs": 3}, None, sparktf.ConfigTypeError, "list of strings"),
        ([], ["missing.py"], sparktf.ConfigError, "missing.py"),
        ([], ["data.csv"], sparktf.ConfigError, ".zip"),
        ([], ["train.py"], sparktf.ConfigError, "twice"),
    ],
)
def test_bad_script_arguments_say_what_to_change(tmp_path, args, py_files, error, words):
    script = write(tmp_path / "train.py", "pass\n")
    write(tmp_path / "data.csv", "1,2\n")
    files = [str(tmp_path / f) for f in py_files or ()]
    with pytest.raises(error, match=None) as info:
        scripts.from_path(script, args, files)
    assert words in str(info.value)


def test_a_missing_or_non_python_script_is_named(tmp_path):
    with pytest.raises(sparktf.ConfigError, match="nothere.py"):
        scripts.from_path(str(tmp_path / "nothere.py"))
    with pytest.raises(sparktf.ConfigError, match=r"\.py"):
        scripts.from_path(write(tmp_path / "train.sh", "echo\n"))
    with pytest.raises(sparktf.ConfigTypeError, match="path"):
        scripts.from_path(42)


def test_only_paths_are_scripts():
    assert scripts.is_script("train.py") and scripts.is_script(__import__("pathlib").Path("t.py"))
    assert not scripts.is_script(print) and not scripts.is_script(None)


@pytest.mark.parametrize(
    "argv, words",
    [
        (["run"], "script"),
        (["run", "--conf", "novalue", "x.py"], "KEY=VALUE"),
        (["run", "--num-ps", "two", "x.py"], "invalid int"),
        (["run", "/nonexistent/train.py"], "no script"),
        (["run", "--py-files", "/nonexistent/helper.py", __file__], "helper.py"),
        (["run", "--env", "NOEQUALS", __file__], "sparktf run: error: --env takes KEY=VALUE"),
        (["train.py"], "invalid choice"),
    ],
)
def test_the_command_line_refuses_bad_usage_in_one_line(argv, words, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert words in capsys.readouterr().err


def test_the_scripts_own_options_are_left_to_it():
    options = cli.parser().parse_args(["run", "--num-ps", "1", "t.py", "--num-ps", "x", "-h"])
    assert options.num_ps == 1 and options.args == ["--num-ps", "x", "-h"]
