"""How many minbert files a learner must open to follow one plain fine-tune step (no method on).

Runs a tiny `train_multitask.py --option finetune` (BertConfig.tiny, 24 rows per task, one epoch) under
sys.setprofile and lists every file of the repository whose functions are called, or call, while the loop runs
one optimizer step: from the first batch's forward to the end of that step (import-time code does not count; the
script counts by its train(), whose loop calls the rest).
Run it on any checkout (`--repo`) to compare two layouts; it only reads the checkout's own code.

    python bench/learner_path.py [--repo PATH]
"""

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path


def in_checkout(filename: str, repo: Path) -> bool:
    """Is `filename` a file of the checkout `repo`? Compared by path parts, so a sibling folder whose name starts
    with the checkout's (`minbert-old` beside `minbert`) is not the checkout."""
    return Path(repo) in Path(filename).parents


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--repo", default=str(Path(__file__).resolve().parents[1]), help="checkout to measure")
    args = p.parse_args()
    repo = Path(args.repo).resolve()
    sys.path[:0] = [str(repo), str(repo / "tests")]
    os.chdir(repo)
    from conftest import save_tiny_model, write_task_files
    import train_multitask

    tmp = Path(tempfile.mkdtemp())
    (tmp / "data").mkdir()
    write_task_files(tmp / "data")
    model = save_tiny_model(tmp / "model")
    called, state = {}, {"on": False, "steps": 0}

    def profile(frame, event, arg):
        if event != "call":
            return
        f = frame.f_code.co_filename
        if state["on"]:   # the function called, and the one calling it (the script's train(), whose loop is the step)
            for code in (frame.f_code, frame.f_back and frame.f_back.f_code):
                if code and in_checkout(code.co_filename, repo) and code.co_name != "<module>":
                    called.setdefault(os.path.relpath(code.co_filename, repo), set()).add(code.co_name)
        if frame.f_code.co_name == "task_loss" and f.endswith("multitask.py") and not state["steps"]:
            state["on"] = True        # the first batch's loss: the step has begun
        if frame.f_code.co_name == "zero_grad" and state["on"]:
            state["steps"] += 1
            if state["steps"] > 1:
                state["on"] = False

    argv = ["--model", str(model), "--data_dir", str(tmp / "data"), "--out_dir", str(tmp / "run"), "--epochs", "1",
            "--batch_size", "4", "--amp", "off", "--option", "finetune"]
    for task in ("sst", "para", "sts"):
        for split in ("dev", "test"):
            argv += [f"--{task}_{split}_out", str(tmp / f"{task}-{split}.csv")]
    sys.setprofile(profile)
    try:
        train_multitask.main(argv)
    finally:
        sys.setprofile(None)
        shutil.rmtree(tmp, ignore_errors=True)
    files = sorted(called)
    lines = {f: sum(1 for _ in open(repo / f)) for f in files}
    for f in files:
        print(f"{lines[f]:>5}  {f}: {', '.join(sorted(called[f]))}")
    print(f"{len(files)} files, {sum(lines.values())} lines, in one plain fine-tune step ({repo})")


if __name__ == "__main__":
    main()
