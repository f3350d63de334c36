"""No dead flags: every flag of every entry point changes something a user can see.

For each flag, a tiny fixed-seed run with the flag at a non-default value (plus the flags it needs to
be active, e.g. --smart_epsilon needs --smart 1) is compared with the same run at the defaults. Its
fingerprint is what a user sees: the per-epoch metrics (the trajectory; wall-clock figures left
out), the prediction files, the names of the files the run wrote, and the number of progress lines. A flag whose effect cannot be
seen that way in a tiny CPU run is listed in NOT_VISIBLE with the reason and the test that covers it.
A new flag lands in neither list by accident: it is run, and fails here if it does nothing.
"""

import argparse
import contextlib
import io
import json
import re

import pytest

import train_mml
import train_multitask
from conftest import save_tiny_model, sentence, write_glue, write_task_files
from minbert.tools import simcse_stage

TIMING = {"elapsed_s", "train_examples_per_s"}

# Flags whose effect a tiny CPU run cannot show, with the reason (and where they are tested).
NOT_VISIBLE = {
    "device": "one device here (CPU); pick_device is tested in test_device.py",
    "use_gpu": "needs a GPU; its conflict with --device is tested in test_errors.py",
    "compile": "the same maths by design (test_compiled.py: equal to 1e-5)",
    "fast_paths": "the same numbers by design (test_fast_paths.py: equal to the readable path); speed: bench/roofline.py",
    "fast_attention": "the same maths by design (test_attention.py: SDPA equals the explicit path)",
    "threads": "how many CPU threads torch runs, not what it computes; the choice: test_device.py",
    "resume": "continues a run exactly: test_interrupt.py and test_train_*.py resume tests",
    "predict_only": "rewrites the predictions of a finished run: test_errors.py, test_run_dir.py",
    "data_dir": "points at another copy of the data: test_data.py (default paths)",
    "glue_dir": "points at another copy of the data: test_glue.py",
    **{f"{t}_{s}": "points at another data file: test_data.py" for t in ("sst", "para", "sts")
       for s in ("train", "dev", "test")},
    "init_from": "needs a finished run folder: test_export.py (stage chaining)",
    "pals_after": "needs a finished run folder: test_export.py, test_pals.py",
    "pals_after_heads": "needs --pals_after: test_pals.py",
    "model": "needs another model folder: test_hub.py",
    "overwrite": "lets a run write into a folder another run used: test_run_dir.py",
    "data": "minbert.tools.simcse_stage: points at another sentence file: test_simcse.py",
    "nli": "minbert.tools.simcse_stage: supervised SimCSE on an NLI file: test_simcse.py",
    "report_to": "needs the optional tensorboard package: test_progress.py (a stand-in writer; refused without it)",
}

# A non-default value for flags where the automatic choice (switch on, another choice, double the
# number) is invalid or shows nothing, and the flags each one needs to be active.
VALUES = {"max_seq_len": "5", "limit": "12", "steps_per_epoch": "2", "warmup": "0.5", "seed": "5",
          "hidden_dropout_prob": "0.0", "amp": "bf16", "head_layers": "2", "pals_size": "8", "pals_heads": "4",
          "mnr": "1", "mnr_scale": "5", "schedule": "round_robin", "task": "QNLI", "eval_tasks": "MNLI", "grad_compromise": "5", "grad_compromise_clip_high": "0.4",
          "head_pretrain_epochs": "1", "head_pretrain_patience": "1", "head_pretrain_lr": "0.1",
          "smart_epsilon": "1e-2", "smart_sigma": "1e-2", "smart_eta": "1e-1", "smart_mu": "3", "r3f_epsilon": "1e-1",
          "gradvac_beta": "0.9", "eliminate_every": "3", "min_bandwidth": "0.5", "heads": "8", "lr": "0.05",
          "head_lr": "0.05", "log_seconds": "1e-9", "log_every": "1", "attention_dropout": "0.5", "hidden_dropout": "0.5", "batch_size": "6", "epochs": "3", "weight_decay": "0.5", "para_head": "cosine"}
NEEDS = {
    "head_layers": ["--head", "mlp"], "head_activation": ["--head", "mlp"],
    **{f: ["--pals", "--pals_size", "8", "--pals_heads", "2"] for f in ("pals_heads", "pals_init")},
    "pals_size": ["--pals", "--pals_heads", "4"], "pals": ["--pals_size", "8", "--pals_heads", "2"],
    **{f: ["--smart", "1"] for f in ("smart_epsilon", "smart_sigma", "smart_eta", "smart_mu", "smart_steps", "smart_mode")},
    **{f: ["--r3f", "1"] for f in ("r3f_epsilon", "r3f_noise", "r4f")},
    **{f: ["--para_head", "cosine", "--mnr", "1", "--schedule", "round_robin", "--steps_per_epoch", "9"]
       for f in ("mnr_score", "mnr_scale", "mnr_schedule", "mnr_batches")},
    "heterogeneous_mix": ["--heterogeneous"],
    "mnr": ["--para_head", "cosine", "--schedule", "round_robin", "--steps_per_epoch", "9"],
    "gradvac_groups": ["--surgery", "gradvac"], "gradvac_beta": ["--surgery", "gradvac"],
    "grad_compromise_clip_high": ["--grad_compromise", "8"], "grad_compromise_normalize": ["--grad_compromise", "5"],
    "head_pretrain_patience": ["--head_pretrain_epochs", "3"], "head_pretrain_lr": ["--head_pretrain_epochs", "1"],
    "eliminate_every": ["--heads", "32", "--min_bandwidth", "0.001"],
    "min_bandwidth": ["--heads", "32", "--eliminate_every", "3", "--min_bandwidth", "0.001"],
    "head_reduction": ["--heads", "8"],
}


def other_value(action, where) -> list[str]:
    """Arguments that set `action` to something other than its default (paths: another name under `where`)."""
    flag = action.option_strings[0]
    if action.dest == "out_dir" or action.dest.endswith("_out"):
        return [flag, str(where / "elsewhere" / action.dest)]
    if isinstance(action, argparse.BooleanOptionalAction):   # --x / --no-x
        return [action.option_strings[1] if action.default else flag]
    if action.nargs == 0:   # store_true
        return [flag]
    if action.dest in VALUES:
        return [flag, VALUES[action.dest]]
    if action.choices:
        return [flag, next(str(c) for c in action.choices if c != action.default and c != "auto")]
    if isinstance(action.default, (int, float)) and not isinstance(action.default, bool):
        return [flag, str(action.default * 2 or 1)]
    raise AssertionError(f"no non-default value known for {flag}: add one to VALUES in {__file__}")


def fingerprint(root, printed: str) -> dict:
    """What a user sees of a run under `root`: metrics, prediction files, the files written, and how many
    progress lines it printed (minbert/core/progress.py)."""
    seen = {"files": sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()),
            "progress_lines": len(re.findall(r"^.+: +\d+%\|", printed, re.M))}   # tqdm's lines in a log
    for path in root.rglob("*"):
        if path.name == "metrics.jsonl":
            rows = [json.loads(x) for x in path.read_text().splitlines()]
            seen["metrics"] = [{k: v for k, v in r.items() if k not in TIMING} for r in rows]
        elif path.suffix == ".csv" or path.name in ("cross_dataset.json", "eliminations.jsonl"):
            seen[path.name] = path.read_text()
        elif path.name == "metrics.json":   # minbert.tools.simcse_stage: its losses and STS reports, not its flags or time
            seen["metrics"] = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("args", "train_s")}
    return seen


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    root = tmp_path_factory.mktemp("flags")
    (root / "cs224n").mkdir()
    write_task_files(root / "cs224n", n=36)
    sst = root / "cs224n" / "ids-sst-train.csv"   # unequal task sizes (12, 36, 36), so the schedules differ
    sst.write_text("\n".join(sst.read_text().splitlines()[:13]) + "\n")
    write_glue(root / "glue")
    save_tiny_model(root / "model")
    return root


def captured(main, argv, out) -> dict:
    """Run an entry point's main in-process; --dry_run's exit is a normal end."""
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        try:
            main(argv)
        except SystemExit as e:
            assert e.code == 0, f"{argv}: exit status {e.code}"
    return fingerprint(out, printed.getvalue())


def multitask_run(tiny, out, extra):
    args = ["--model", str(tiny / "model"), "--data_dir", str(tiny / "cs224n"), "--out_dir", str(out / "run"),
            "--epochs", "2", "--steps_per_epoch", "3", "--batch_size", "4", "--lr", "1e-3", "--seed", "3",
            "--device", "cpu", "--amp", "off", "--hidden_dropout_prob", "0.1"]
    args += [a for t in ("sst", "para", "sts") for s in ("dev", "test")
             for a in (f"--{t}_{s}_out", str(out / "predictions" / f"{t}-{s}.csv"))]
    return captured(train_multitask.main, args + extra, out)


def mml_run(tiny, out, extra):
    args = ["--task", "RTE", "--model", str(tiny / "model"), "--glue_dir", str(tiny / "glue"), "--out_dir",
            str(out / "run"), "--epochs", "2", "--batch_size", "4", "--lr", "1e-3", "--seed", "3", "--device", "cpu",
            "--amp", "off", "--eval_tasks", "QNLI"]
    return captured(train_mml.main, args + extra, out)


def simcse_run(tiny, out, extra):
    sentences = tiny / "sentences.txt"
    if not sentences.exists():
        sentences.write_text("\n".join(sentence(i) for i in range(24)) + "\n")
    args = ["--model", str(tiny / "model"), "--data", str(sentences), "--data_dir", str(tiny / "cs224n"),
            "--out_dir", str(out / "run"), "--batch_size", "8", "--seed", "3", "--device", "cpu", "--amp", "off",
            "--lr", "1e-3"]
    return captured(simcse_stage.main, args + extra, out)


ENTRY_POINTS = {"train_multitask": (train_multitask.parser, multitask_run),
                "train_mml": (train_mml.parser, mml_run),
                "simcse": (simcse_stage.parser, simcse_run)}


def cases():
    for name, (parser, _) in ENTRY_POINTS.items():
        for action in parser()._actions:
            if action.option_strings and action.dest not in ("help", *NOT_VISIBLE):
                yield pytest.param(name, action, id=f"{name}--{action.dest}")


@pytest.fixture(scope="module")
def baselines(tiny, tmp_path_factory):
    seen = {}
    for name, (_, run) in ENTRY_POINTS.items():
        seen[name] = run(tiny, tmp_path_factory.mktemp(f"baseline_{name}"), [])
    return seen


@pytest.mark.parametrize("entry, action", list(cases()))
def test_flag_changes_what_the_run_shows(tiny, baselines, tmp_path, entry, action):
    parser, run = ENTRY_POINTS[entry]
    needs = NEEDS.get(action.dest, [])
    base = baselines[entry]
    if needs:   # compare with the run that has the prerequisites but the flag at its default
        base = run(tiny, tmp_path / "base", needs)
    flag = other_value(action, tmp_path / "flag")
    changed = run(tiny, tmp_path / "flag", needs + flag)
    assert changed != base, (f"{entry} {' '.join(needs + flag)}: the metrics, prediction files and "
                             f"file list equal the run without it, so the flag did nothing. Wire it to the "
                             f"code it names, or list it in NOT_VISIBLE with the reason.")
