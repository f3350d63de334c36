"""minbert/core/flags.py: the argparse `type=` checks, the output-path checks and @recipe files.

Oracle: (b) live — argparse itself. A value our checks accept parses to what argparse's plain
`type=int` / `type=float` gives; a value they refuse stops the way argparse stops on its own type
errors (exit status 2, "error: argument --flag: <why>" on stderr, nothing parsed). A recipe file read
by flags.ArgumentParser gives the namespace argparse gives for the same flags typed on the command
line, and for a comment-free copy of the file read by argparse's own `fromfile_prefix_chars`.
(c) properties for the path checks: a bad path raises a UserError naming the flag and the path,
and a good one leaves no scratch file behind.
Run: python -m pytest -q tests/core/test_flags.py   (offline, CPU, under a second)
"""

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import meet_file_modes

from minbert.core import flags
from minbert.core.errors import UserError

ROOT = Path(__file__).resolve().parents[2]


def parse(type_, text, capsys):
    """Parse `--x=text` with type=type_; returns (value, None) or (None, stderr text) after exit 2.
    (The `=` form: argparse reads a separate "-1e-5" as an option, not as a negative number.)"""
    parser = flags.ArgumentParser(prog="prog")
    parser.add_argument("--x", type=type_)
    try:
        return parser.parse_args([f"--x={text}"]).x, None
    except SystemExit as e:
        err = capsys.readouterr().err
        assert e.code == 2, f"a refused value must exit like argparse (status 2), got {e.code}"
        return None, err


# ---------------------------------------------------------------------------- type= checks against argparse
@pytest.mark.parametrize("check, plain, text", [
    (flags.at_least(1), int, "1"), (flags.at_least(1), int, "512"), (flags.at_least(0), int, "0"),
    (flags.at_least(0.5, float), float, "0.5"), (flags.at_least(0.5, float), float, "1e3"),
    (flags.between(0.0, 1.0), float, "0"), (flags.between(0.0, 1.0), float, "1"),
    (flags.between(0.0, 1.0), float, ".25"),
    (flags.between(0.0, 1.0, open_lo=True), float, "1e-9"), (flags.between(5, 512, int), int, "5"),
    (flags.positive, float, "1e-5"), (flags.positive, float, "3"),
])
def test_accepted_values_parse_like_plain_argparse(capsys, check, plain, text):
    got, err = parse(check, text, capsys)
    want, _ = parse(plain, text, capsys)
    assert err is None, f"minbert.core.flags: {text!r} must be accepted, got: {err}"
    assert got == want and type(got) is type(want), \
        f"minbert.core.flags: {text!r} parsed to {got!r} ({type(got).__name__}); " \
        f"argparse type={plain.__name__} gives {want!r}"


@pytest.mark.parametrize("check, text, why", [
    (flags.at_least(1), "0", "expected an integer >= 1, got 0"),
    (flags.at_least(1), "-3", "expected an integer >= 1, got -3"),
    (flags.at_least(1), "1.5", "expected an integer, got '1.5'"),
    (flags.at_least(1), "many", "expected an integer, got 'many'"),
    (flags.at_least(0.5, float), "0.49", "expected a number >= 0.5, got 0.49"),
    (flags.at_least(0.5, float), "nan", "expected a finite number, got 'nan'"),
    (flags.between(0.0, 1.0), "1.01", "expected a number in [0.0, 1.0], got 1.01"),
    (flags.between(0.0, 1.0), "-0.1", "expected a number in [0.0, 1.0], got -0.1"),
    (flags.between(0.0, 1.0, open_lo=True), "0", "expected a number in (0.0, 1.0], got 0"),
    (flags.between(0.0, 1.0), "inf", "expected a finite number, got 'inf'"),
    (flags.positive, "0", "expected a number > 0, got 0"),
    (flags.positive, "-1e-5", "expected a number > 0, got -1e-5"),
    (flags.positive, "nan", "expected a finite number, got 'nan'"),
    (flags.positive, "-inf", "expected a finite number, got '-inf'"),
])
def test_refused_values_stop_like_argparse_type_errors(capsys, check, text, why):
    got, err = parse(check, text, capsys)
    assert err is not None, f"minbert.core.flags: --x {text} must be refused ({why}), got {got!r}"
    _, argparse_err = parse(int, "many", capsys)    # argparse's own wording for a bad type= value
    assert "error: argument --x: " in argparse_err
    assert err.splitlines() == [f"prog: error: argument --x: {why}", "prog: --help for all flags"], \
        (f"minbert.core.flags.BriefParser.error: a refused value must print two lines, the flag with what was expected "
         f"and '--help for all flags' (not argparse's whole usage), got:\n{err}")


# ---------------------------------------------------------------------------- writable_dir / writable_file
def no_scratch_left(folder):
    left = [p for p in os.listdir(folder) if p.startswith(".write-check-")]
    assert not left, f"minbert.core.flags: the write check left scratch files {left} in {folder}"


def test_writable_dir_creates_a_missing_folder_and_cleans_up(tmp_path):
    target = tmp_path / "runs" / "new"
    flags.writable_dir(str(target), "--out_dir")
    assert target.is_dir(), "minbert.core.flags.writable_dir must create a missing output folder"
    no_scratch_left(target)


def test_writable_file_creates_its_folder_and_cleans_up(tmp_path):
    target = tmp_path / "predictions" / "sst-dev-output.csv"
    flags.writable_file(str(target), "--sst_dev_out")
    assert target.parent.is_dir() and not target.exists(), \
        "minbert.core.flags.writable_file must create the folder, and not the file itself"
    no_scratch_left(target.parent)


@pytest.mark.parametrize("check, flag, make, why", [
    (flags.writable_dir, "--out_dir", lambda t: (t / "f").write_text("x") and t / "f", "is a file, expected a folder"),
    (flags.writable_dir, "--out_dir", lambda t: (t / "f").write_text("x") and t / "f" / "run", "cannot write there"),
    (flags.writable_file, "--sst_dev_out", lambda t: t, "is a folder, expected a file path"),
    (flags.writable_file, "--sst_dev_out", lambda t: (t / "f").write_text("x") and t / "f" / "out.csv",
     "cannot write there"),
], ids=["dir-is-a-file", "dir-under-a-file", "file-is-a-folder", "file-under-a-file"])
def test_unwritable_paths_raise_a_user_error_naming_flag_and_path(tmp_path, check, flag, make, why):
    path = str(make(tmp_path))
    with pytest.raises(UserError) as e:
        check(path, flag)
    message = str(e.value)
    assert message.startswith(f"{flag} {path}") and why in message, \
        f"minbert.core.flags.{check.__name__}({path!r}): expected '{flag} {path}: ...{why}...', got {message!r}"


@pytest.mark.skipif(sys.platform != "linux", reason="dropping root's override of file modes is Linux's")
def test_read_only_file_and_folder_are_refused(tmp_path):
    """Checked in a child that meets file modes even as root (conftest.meet_file_modes): it used to skip as root."""
    ro = tmp_path / "ro"
    ro.mkdir()
    (ro / "out.csv").write_text("x")
    (tmp_path / "done.csv").write_text("x")
    os.chmod(tmp_path / "done.csv", 0o444)
    os.chmod(ro, 0o555)
    check = ("import sys\nfrom minbert.core import flags\nfrom minbert.core.errors import UserError\n"
             "for f, path, flag in ((flags.writable_file, sys.argv[1], '--sst_dev_out'), "
             "(flags.writable_dir, sys.argv[2], '--out_dir')):\n"
             "    try:\n        f(path, flag)\n        print('accepted', path)\n"
             "    except UserError as e:\n        print(e)\n")
    try:
        p = subprocess.run([sys.executable, "-c", check, str(tmp_path / "done.csv"), str(ro)], capture_output=True,
                           text=True, cwd=ROOT, timeout=120, preexec_fn=meet_file_modes)
    finally:
        os.chmod(ro, 0o755)
    lines = p.stdout.splitlines()
    assert p.returncode == 0 and len(lines) == 2, f"the check did not run:\n{p.stdout}{p.stderr[-1500:]}"
    assert "read-only" in lines[0], f"minbert.core.flags.writable_file on a 0444 file: {lines[0]!r}"
    assert "cannot write there" in lines[1], f"minbert.core.flags.writable_dir on a 0555 folder: {lines[1]!r}"


# ---------------------------------------------------------------------------- @recipe files
def recipe_parser(cls=flags.ArgumentParser, **kw):
    p = cls(prog="prog", **kw)
    p.add_argument("--lr", type=flags.positive, default=1e-5)
    p.add_argument("--epochs", type=flags.at_least(1), default=10)
    p.add_argument("--smart", action="store_true")
    p.add_argument("--tasks", nargs="+", default=["sst"])
    p.add_argument("--out_dir", default="runs")
    return p


RECIPE = """# Song, Hu & Pan (CS224N report), §4: the weak SMART setting
--lr 2e-5          # §4.1: learning rate
--epochs 3

--smart            # a flag without a value
--tasks sst para sts   # nargs='+' on one line
"""
ARGV = ["--lr", "2e-5", "--epochs", "3", "--smart", "--tasks", "sst", "para", "sts"]


def test_recipe_file_with_comments_equals_the_same_flags_on_the_command_line(tmp_path):
    (tmp_path / "weak.args").write_text(RECIPE)
    got = recipe_parser().parse_args([f"@{tmp_path / 'weak.args'}"])
    del got.dry_run   # every flags.ArgumentParser has --dry_run; argparse's has not
    want = recipe_parser(argparse.ArgumentParser).parse_args(ARGV)
    assert vars(got) == vars(want), \
        f"minbert.core.flags.ArgumentParser @file: {vars(got)} differs from the command line's {vars(want)}"
    # argparse's own @file reading (one argument per line, no comments) of the same flags
    (tmp_path / "plain.args").write_text("\n".join(ARGV) + "\n")
    plain_parser = recipe_parser(argparse.ArgumentParser, fromfile_prefix_chars="@")
    plain = plain_parser.parse_args([f"@{tmp_path / 'plain.args'}"])
    assert vars(got) == vars(plain), \
        f"minbert.core.flags.ArgumentParser @file: {vars(got)} differs from argparse's {vars(plain)}"


def test_flags_after_a_recipe_override_it_as_in_argparse(tmp_path):
    (tmp_path / "weak.args").write_text(RECIPE)
    got = recipe_parser().parse_args([f"@{tmp_path / 'weak.args'}", "--lr", "1e-3", "--epochs", "1"])
    assert (got.lr, got.epochs, got.smart) == (1e-3, 1, True), \
        f"minbert.core.flags.ArgumentParser: a flag after @file must win (argparse: the last value wins), got {vars(got)}"
    (tmp_path / "outer.args").write_text(f"@{tmp_path / 'weak.args'}   # a recipe may include another\n--epochs 7\n")
    nested = recipe_parser().parse_args([f"@{tmp_path / 'outer.args'}"])
    assert (nested.lr, nested.epochs, nested.tasks) == (2e-5, 7, ["sst", "para", "sts"]), \
        f"minbert.core.flags.ArgumentParser: nested @file lines must be read in order, got {vars(nested)}"


def test_bad_value_or_missing_recipe_file_stops_like_argparse(tmp_path, capsys):
    (tmp_path / "bad.args").write_text("--epochs 0   # typo\n")
    with pytest.raises(SystemExit) as e:
        recipe_parser().parse_args([f"@{tmp_path / 'bad.args'}"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "argument --epochs: expected an integer >= 1, got 0" in err, \
        f"a bad value inside a recipe must stop at parse time naming the flag, got {e.value.code}:\n{err}"
    missing = str(tmp_path / "nope.args")
    with pytest.raises(SystemExit) as e:
        recipe_parser().parse_args([f"@{missing}"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and missing in err and "Traceback" not in err, \
        f"a missing @file must exit 2 with argparse's message naming the file, got {e.value.code}:\n{err}"


def test_a_hash_inside_a_value_is_not_a_comment(tmp_path):
    """Only a `#` at the start of a line or after a space starts a comment (as in a shell)."""
    (tmp_path / "r.args").write_text("--out_dir runs/#3   # the third run\n# a whole-line comment\n")
    p = flags.ArgumentParser()
    p.add_argument("--out_dir")
    assert p.parse_args([f"@{tmp_path / 'r.args'}"]).out_dir == "runs/#3", \
        "minbert.core.flags.ArgumentParser.convert_arg_line_to_args cut a value at its '#'"


def test_sub_parsers_of_python_m_tools_print_two_lines_too(capsys):
    """python -m minbert download glue --tasks XX: the sub-parser's error is as short as the top parser's."""
    from minbert.tools import download
    with pytest.raises(SystemExit) as e:
        download.main(["glue", "--tasks", "XX"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and len(err.splitlines()) == 2 and err.splitlines()[1].endswith("--help for all flags"), \
        f"minbert.tools.download: a bad value must print 2 lines (error, --help), got {len(err.splitlines())}:\n{err}"
    assert "argument --tasks" in err and "XX" in err, f"the error must name the flag and the value:\n{err}"


# ---------------------------------------------------------------------------- "did you mean"
def refused(parse_args, argv, capsys):
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    err = capsys.readouterr().err.splitlines()
    assert stop.value.code == 2 and len(err) == 2, f"{argv}: expected status 2 and two lines, got {stop.value.code}: {err}"
    return err[0]


@pytest.mark.parametrize("argv, want", [
    (["--task", "RTE", "--epoch_s", "3"], "unrecognized arguments: --epoch_s 3; did you mean --epochs?"),
    (["--task", "RTE", "--methd=mml"], "unrecognized arguments: --methd=mml; did you mean --method?"),
    (["--task", "RTF"], "argument --task: invalid choice: 'RTF'; did you mean 'RTE'? (choose from 'CoLA', 'SST-2'"),
    (["--task", "RTE", "--method", "mlm"], "argument --method: invalid choice: 'mlm'; did you mean 'mml'?"),
    (["--task", "RTE", "--zzz"], "unrecognized arguments: --zzz"),   # nothing close: no guess
])
def test_a_mistyped_flag_or_choice_names_the_closest_one(argv, want, capsys):
    import train_mml
    line = refused(train_mml.parse_args, argv, capsys)
    assert want in line and line.count("did you mean") == want.count("did you mean"), \
        f"train_mml.py {' '.join(argv)}: expected {want!r} in the error, got {line!r}"


# Hugging Face Trainer's names of flags both scripts have (written out here, not imported from flags.py)
HUGGING_FACE = {"--learning_rate": "--lr", "--output_dir": "--out_dir", "--num_train_epochs": "--epochs",
                "--per_device_train_batch_size": "--batch_size", "--resume_from_checkpoint": "--resume",
                "--fp16": "--amp fp16", "--use_cpu": "--device cpu"}


@pytest.mark.parametrize("script", ["train_multitask", "train_mml"])
@pytest.mark.parametrize("theirs, ours", HUGGING_FACE.items(), ids=list(HUGGING_FACE))
def test_a_flag_in_hugging_faces_spelling_names_minberts(script, theirs, ours, capsys):
    """Oracle: transformers.TrainingArguments has the field (so the spelling is Hugging Face's); the error names
    minbert's flag, which difflib's closeness alone missed (--learning_rate, --per_device_train_batch_size: no guess;
    --num_train_epochs: --head_pretrain_epochs)."""
    import dataclasses
    import importlib
    from transformers import TrainingArguments
    assert theirs[2:] in {f.name for f in dataclasses.fields(TrainingArguments)}, f"{theirs}: not Hugging Face's"
    argv = (["--task", "RTE"] if script == "train_mml" else []) + [theirs] + ([] if theirs in ("--fp16", "--use_cpu")
                                                                            else ["1"])
    line = refused(importlib.import_module(script).parse_args, argv, capsys)
    assert line.endswith(f"did you mean {ours}? ({theirs} is Hugging Face's spelling)"), \
        f"{script}.py {theirs}: the error must name {ours} (minbert/core/flags.py HF_SPELLINGS), got {line!r}"


@pytest.mark.parametrize("command, argv, want", [
    ("study", ["--configs", "baseline,palss"], "--configs: unknown configuration 'palss'; did you mean pals? Choose from"),
    ("mml_study", ["--tasks", "RTE,MRCP"], "--tasks: unknown task 'MRCP'; did you mean MRPC? Choose from"),
    ("mml_study", ["--methods", "mml,bert_drop"], "--methods: unknown method 'bert_drop'; did you mean bert-drop?"),
])
def test_a_mistyped_name_in_a_studys_lists_names_the_closest_one(command, argv, want, capsys):
    import importlib
    module = importlib.import_module(f"bench.{command}")
    line = refused(module.parse_args, argv, capsys)
    assert want in line, f"python bench/{command}.py {' '.join(argv)}: expected {want!r}, got {line!r}"


def test_unknown_offers_no_guess_when_nothing_is_close():
    assert flags.unknown("task", "BoolQ", ["RTE", "MRPC"]) == "unknown task 'BoolQ'; choose from RTE, MRPC"
    assert flags.closest("sts-b", ["STS-B", "SST-2"]) == "STS-B", "case does not count against a guess"
