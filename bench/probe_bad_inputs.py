"""Probe the command-line tools with bad inputs a user could give, and report how each one ends.

Each probe runs as a real process (`python train_multitask.py ...`, `python train_mml.py ...`,
`python -m minbert download ...`) on a tiny model and tiny data built in a temporary folder, and is
classified by what the user sees:

  message    non-zero exit, no traceback (the goal)
  traceback  a Python traceback reached the terminal
  ran        exit status 0: the bad input was accepted (silently wrong, or failed late)

The table gives the number of lines on stderr and, where a probe leaves a run folder, the status its
run.json ends with. Unwritable folders are probed as a user who meets file modes (run as root, the child
drops CAP_DAC_OVERRIDE from its bounding set, as `setpriv --bounding-set=-dac_override` does); a full disk is
a 2 MB tmpfs mounted in a user namespace (`unshare -rm`; the row says so where that is not allowed).

Run it from any checkout (it only uses the command lines, so it works on old versions too):
    python bench/probe_bad_inputs.py [--repo DIR] [--out bench/results/bad_inputs.md]
"""

import argparse
import ctypes
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def build_fixtures(root: Path, repo: Path) -> dict:
    """A tiny random BERT with MiniLM's vocabulary, 8-row CS224N files, 8-row RTE/MRPC files."""
    code = f"""
import shutil, sys, torch
sys.path.insert(0, {str(repo)!r})
from minbert.core import hub
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
torch.manual_seed(0)
BertModel(BertConfig.tiny()).save_pretrained({str(root / 'model')!r})
shutil.copy(hub.resolve('minilm-l6') / 'vocab.txt', {str(root / 'model' / 'vocab.txt')!r})
"""
    subprocess.run([sys.executable, "-c", code], check=True)
    data = root / "data"
    data.mkdir()
    words = "good bad movie plot actor great awful film".split()
    sent = lambda i: " ".join(words[(i * k) % len(words)] for k in (1, 3, 5))  # noqa: E731
    files = {
        "ids-sst-train.csv": ("\tid\tsentence\tsentiment", lambda i: f"{i}\ts{i}\t{sent(i)}\t{i % 5}"),
        "ids-sst-dev.csv": ("\tid\tsentence\tsentiment", lambda i: f"{i}\tsd{i}\t{sent(i + 1)}\t{i % 5}"),
        "ids-sst-test-student.csv": ("0\t\tid\tsentence", lambda i: f"{i}\t0.0\tst{i}\t{sent(i + 2)}"),
        "quora-train.csv": ("\tid\tsentence1\tsentence2\tis_duplicate", lambda i: f"{i}\tq{i}\t{sent(i)}\t{sent(i + 1)}\t{float(i % 2)}"),
        "quora-dev.csv": ("\tid\tsentence1\tsentence2\tis_duplicate", lambda i: f"{i}\tqd{i}\t{sent(i)}\t{sent(i + 2)}\t{float(i % 2)}"),
        "quora-test-student.csv": ("\tid\tsentence1\tsentence2", lambda i: f"{i}\tqt{i}\t{sent(i)}\t{sent(i + 3)}"),
        "sts-train.csv": ("\tid\tsentence1\tsentence2\tsimilarity", lambda i: f"{i}\tt{i}\t{sent(i)}\t{sent(i + 1)}\t{i % 6}.0"),
        "sts-dev.csv": ("\tid\tsentence1\tsentence2\tsimilarity", lambda i: f"{i}\ttd{i}\t{sent(i)}\t{sent(i + 2)}\t{i % 6}.0"),
        "sts-test-student.csv": ("\tid\tsentence1\tsentence2", lambda i: f"{i}\ttt{i}\t{sent(i)}\t{sent(i + 1)}"),
    }
    for name, (header, row) in files.items():
        (data / name).write_text("\n".join([header] + [row(i) for i in range(8)]) + "\n")
    glue = root / "glue"
    for task in ("RTE", "MRPC"):
        (glue / task).mkdir(parents=True)
    for split in ("train", "dev"):
        rows = [f"{i}\t{sent(i)}\t{sent(i + 1)}\t{'entailment' if i % 2 else 'not_entailment'}" for i in range(8)]
        (glue / "RTE" / f"{split}.tsv").write_text("index\tsentence1\tsentence2\tlabel\n" + "\n".join(rows) + "\n")
        rows = [f"{i % 2}\t{i}\t{i + 100}\t{sent(i)}\t{sent(i + 1)}" for i in range(8)]
        (glue / "MRPC" / f"{split}.tsv").write_text("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n" + "\n".join(rows) + "\n")
    bad = root / "bad"
    bad.mkdir()
    (bad / "header_only.csv").write_text("\tid\tsentence\tsentiment\n")
    (bad / "binary.csv").write_bytes(b"\tid\tsentence\tsentiment\n" + bytes(range(128, 256)) * 8)
    (bad / "wrong_columns.csv").write_text("\tid\ttext\tlabel\n0\ta\thello\t1\n")
    (bad / "sts_label_7.csv").write_text("\tid\tsentence1\tsentence2\tsimilarity\n0\ta\thello\tthere\t7.0\n")
    (bad / "a_file").write_text("not a folder")
    (bad / "junk.pt").write_text("not a checkpoint")
    (bad / "read_only").mkdir()
    (bad / "read_only").chmod(0o555)
    (bad / "full_disk").mkdir()
    weights = {"bert.embeddings.word_embeddings.weight": "torch.zeros(2, 2)"}   # a model's weights, not a checkpoint
    code = f"import torch; torch.save({{{', '.join(f'{k!r}: {v}' for k, v in weights.items())}}}, " \
           f"{str(bad / 'pytorch_model.bin')!r})"
    subprocess.run([sys.executable, "-c", code], check=True)
    for name in ("no_weights", "truncated", "bad_config"):
        shutil.copytree(root / "model", bad / name)
    (bad / "no_weights" / "model.safetensors").unlink()
    w = bad / "truncated" / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    (bad / "bad_config" / "config.json").write_text('{"hidden_size": 32,\n "oops"\n}')
    return {"model": root / "model", "data": data, "glue": glue, "bad": bad, "root": root}


def probes(f: dict) -> list[tuple[str, list[str]]]:
    bad, runs = f["bad"], f["root"] / "runs"
    mt = ["train_multitask.py", "--model", str(f["model"]), "--data_dir", str(f["data"]), "--epochs", "1",
          "--batch_size", "4", "--amp", "off", "--out_dir", str(runs / "mt")]
    mt += [x for t in ("sst", "para", "sts") for s in ("dev", "test")
           for x in (f"--{t}_{s}_out", str(runs / "pred" / f"{t}-{s}.csv"))]
    mml = ["train_mml.py", "--task", "RTE", "--model", str(f["model"]), "--glue_dir", str(f["glue"]), "--epochs", "1",
           "--batch_size", "4", "--amp", "off", "--out_dir", str(runs / "mml")]
    good = runs / "good"   # a finished run with --keep_resume_state (main() makes it, and the copies below)
    last, best = str(good / "last.pt"), str(good / "best.pt")
    resume = lambda folder, ck: mt + ["--out_dir", str(folder), "--resume", str(folder / ck)]  # noqa: E731
    return [
        ("train_multitask --batch_size 0", mt + ["--batch_size", "0"]),
        ("train_multitask --batch_size -3", mt + ["--batch_size", "-3"]),
        ("train_multitask --epochs 0", mt + ["--epochs", "0"]),
        ("train_multitask --lr -1", mt + ["--lr", "-1"]),
        ("train_multitask --lr 0", mt + ["--lr", "0"]),
        ("train_multitask --lr nan", mt + ["--lr", "nan"]),
        ("train_multitask --head_lr -1", mt + ["--head_lr", "-1"]),
        ("train_multitask --limit -5", mt + ["--limit", "-5"]),
        ("train_multitask --max_seq_len 3", mt + ["--max_seq_len", "3"]),
        ("train_multitask --max_seq_len 100000", mt + ["--max_seq_len", "100000"]),
        ("train_multitask --hidden_dropout_prob 1.5", mt + ["--hidden_dropout_prob", "1.5"]),
        ("train_multitask --warmup 2", mt + ["--warmup", "2"]),
        ("train_multitask --grad_accum 0", mt + ["--grad_accum", "0"]),
        ("train_multitask --steps_per_epoch -1", mt + ["--steps_per_epoch", "-1"]),
        ("train_multitask --weight_decay -0.1", mt + ["--weight_decay", "-0.1"]),
        ("train_multitask --pals --pals_size 10 --pals_heads 3", mt + ["--pals", "--pals_size", "10", "--pals_heads", "3"]),
        ("train_multitask --device gpu", mt + ["--device", "gpu"]),
        ("train_multitask --device cuda (no GPU here)", mt + ["--device", "cuda"]),
        ("train_multitask --model /nonexistent", mt + ["--model", "/nonexistent/model"]),
        ("train_multitask --model DIR without weights", mt + ["--model", str(bad / "no_weights")]),
        ("train_multitask --model DIR with truncated model.safetensors", mt + ["--model", str(bad / "truncated")]),
        ("train_multitask --model DIR with malformed config.json", mt + ["--model", str(bad / "bad_config")]),
        ("train_multitask --sst_train missing file", mt + ["--sst_train", str(bad / "missing.csv")]),
        ("train_multitask --sst_train header-only file", mt + ["--sst_train", str(bad / "header_only.csv")]),
        ("train_multitask --sst_train binary file", mt + ["--sst_train", str(bad / "binary.csv")]),
        ("train_multitask --sst_train wrong columns", mt + ["--sst_train", str(bad / "wrong_columns.csv")]),
        ("train_multitask --sts_train label 7.0", mt + ["--sts_train", str(bad / "sts_label_7.csv")]),
        ("train_multitask --out_dir under a file", mt + ["--out_dir", str(bad / "a_file" / "run")]),
        ("train_multitask --sst_dev_out under a file", mt + ["--sst_dev_out", str(bad / "a_file" / "p.csv")]),
        ("train_multitask --resume missing file", mt + ["--resume", str(bad / "missing.pt")]),
        ("train_multitask --resume junk file", mt + ["--resume", str(bad / "junk.pt")]),
        ("train_multitask --resume best.pt", resume(good, "best.pt")),
        ("train_multitask --resume last.pt with --smart 1 added", resume(good, "last.pt") + ["--smart", "1"]),
        ("train_multitask --resume last.pt cut short (a copy that did not finish)", resume(runs / "cut", "last.pt")),
        ("train_multitask --resume train_mml's last.pt", mt + ["--resume", str(runs / "mml_good" / "last.pt")]),
        ("train_multitask --predict_only --resume train_mml's best.pt",
         mt + ["--predict_only", "--resume", str(runs / "mml_good" / "best.pt")]),
        ("train_multitask --resume a weights file (no 'model' key)", mt + ["--resume", str(bad / "pytorch_model.bin")]),
        ("train_multitask --out_dir read-only folder", mt + ["--out_dir", str(bad / "read_only")], "modes"),
        ("train_multitask --out_dir inside a read-only folder", mt + ["--out_dir", str(bad / "read_only" / "run")],
         "modes"),
        ("train_multitask --out_dir under /proc", mt + ["--out_dir", "/proc/minbert-probe"]),
        ("train_multitask --out_dir on a full disk (2 MB tmpfs)", mt + ["--out_dir", str(bad / "full_disk" / "run")],
         "full_disk"),
        ("train_mml --out_dir read-only folder", mml + ["--out_dir", str(bad / "read_only")], "modes"),
        ("train_multitask --predict_only without --resume", mt + ["--predict_only"]),
        ("train_multitask --grad_compromise 2 (< 3 tasks)", mt + ["--grad_compromise", "2"]),
        ("train_multitask --grad_compromise 4 --surgery pcgrad", mt + ["--grad_compromise", "4", "--surgery", "pcgrad"]),
        ("train_multitask --mnr 0.1 with cross-encoder heads", mt + ["--mnr", "0.1"]),
        ("train_multitask --r3f 1 --para_head cosine", mt + ["--r3f", "1", "--para_head", "cosine"]),
        ("train_multitask --option pretrain --head_pretrain_epochs 2", mt + ["--option", "pretrain", "--head_pretrain_epochs", "2"]),
        ("train_multitask --schedule bogus", mt + ["--schedule", "bogus"]),
        ("train_mml --task BOGUS", mml + ["--task", "BOGUS"]),
        ("train_mml --batch_size 0", mml + ["--batch_size", "0"]),
        ("train_mml --heads 0", mml + ["--heads", "0"]),
        ("train_mml --method bert --heads 5", mml + ["--method", "bert", "--heads", "5"]),
        ("train_mml --eval_tasks CoLA (other category)", mml + ["--eval_tasks", "CoLA"]),
        ("train_mml --glue_dir /nonexistent", mml + ["--glue_dir", "/nonexistent"]),
        ("train_mml --epochs 0", mml + ["--epochs", "0"]),
        ("train_mml --lr -1", mml + ["--lr", "-1"]),
        ("train_mml --out_dir under a file", mml + ["--out_dir", str(bad / "a_file" / "mml")]),
        ("train_mml --device gpu", mml + ["--device", "gpu"]),
        ("download cs224n --dest under a file", ["-m", "minbert", "download", "cs224n", "--dest", str(bad / "a_file" / "d")]),
        ("download glue --tasks FOO", ["-m", "minbert", "download", "glue", "--tasks", "FOO", "--dest", str(runs / "g")]),
    ]


NOT_RUN = 97                          # exit status of a probe whose setup (dropping a capability, a tmpfs) failed
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE = 24, 1   # <linux/prctl.h>, <linux/capability.h>


def meet_file_modes():
    """In the child, before exec: root loses CAP_DAC_OVERRIDE (bounding set), so file modes apply to it."""
    if os.geteuid() == 0 and ctypes.CDLL(None, use_errno=True).prctl(PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, 0, 0, 0):
        os._exit(NOT_RUN)


def run(cmd, how, env, cwd, bad):
    if how == "full_disk":   # a 2 MB tmpfs on bad/full_disk, in a private mount namespace
        mount = (f'mount -t tmpfs -o size=2m tmpfs {bad / "full_disk"} '
                 f'|| {{ echo "no tmpfs here (unshare -rm)" >&2; exit {NOT_RUN}; }}')
        cmd = ["unshare", "-rm", "sh", "-c", mount + ' && exec "$@"', "sh", *cmd]
        if shutil.which("unshare") is None:
            return subprocess.CompletedProcess(cmd, NOT_RUN, "", "unshare is not installed")
    return subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=600,
                          preexec_fn=meet_file_modes if how == "modes" else None)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), ".."), help="checkout to probe")
    p.add_argument("--out", default=None, help="also write the table to this markdown file")
    p.add_argument("--only", default=None, help="run only the probes whose name contains this text")
    a = p.parse_args()
    repo = Path(a.repo).resolve()
    root = Path(tempfile.mkdtemp(prefix="probe-"))
    try:
        f = build_fixtures(root, repo)
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(repo)}
        # finished runs first (kept resume state), for the --resume probes to point at
        runs, base = f["root"] / "runs", probes(f)[0][1][:-2]   # the first probe's flags without its bad value
        base[base.index("--out_dir") + 1] = str(runs / "good")
        base = [x.replace(str(runs / "pred"), str(runs / "good_pred")) for x in base]   # leave runs/pred free
        subprocess.run([sys.executable, str(repo / base[0]), *base[1:], "--keep_resume_state"], env=env, cwd=root,
                       capture_output=True)
        shutil.copytree(runs / "good", runs / "cut")
        cut = runs / "cut" / "last.pt"
        cut.write_bytes(cut.read_bytes()[: cut.stat().st_size // 2])
        mml = next(argv for name, argv, *_ in probes(f) if name.startswith("train_mml"))[:-2]
        mml[mml.index("--out_dir") + 1] = str(runs / "mml_good")
        subprocess.run([sys.executable, str(repo / mml[0]), *mml[1:], "--keep_resume_state"], env=env, cwd=root,
                       capture_output=True)
        rows, t0 = [], time.time()
        for name, argv, *how in probes(f):
            if a.only and a.only not in name:
                continue
            cmd = [sys.executable, *argv] if argv[0] == "-m" else [sys.executable, str(repo / argv[0]), *argv[1:]]
            r = run(cmd, how[0] if how else None, env, root, f["bad"])
            err = r.stderr.strip()
            outcome = "ran" if r.returncode == 0 else ("traceback" if "Traceback" in err else "message")
            if r.returncode == NOT_RUN:
                outcome, err = "not run", err.splitlines()[-1] if err else "could not set up the probe"
            last = err.splitlines()[-1] if err else r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
            folder = Path(argv[len(argv) - argv[::-1].index("--out_dir")]) if "--out_dir" in argv else None
            marker = folder / "run.json" if folder else None
            status = json.loads(marker.read_text()).get("status", "?") if marker and marker.is_file() else ""
            shown = last.replace(str(root), "TMP").replace("|", "/")[:150]
            shown += f" [run.json: {status}]" if status else ""
            rows.append((name, r.returncode, outcome, len(err.splitlines()), shown))
            print(f"{outcome:9s} {r.returncode:4d}  {name}", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    counts = {k: sum(r[2] == k for r in rows) for k in ("message", "traceback", "ran", "not run")}
    table = [f"{len(rows)} probes of a checkout of minbert ({time.time() - t0:.0f} s): {counts}", "",
             "| probe | exit | outcome | stderr lines | last line the user sees |", "|---|---|---|---|---|"]
    table += [f"| {n} | {c} | {o} | {k} | `{m}` |" for n, c, o, k, m in rows]
    print("\n".join(table))
    if a.out:
        Path(a.out).write_text("\n".join(table) + "\n")


if __name__ == "__main__":
    main()
