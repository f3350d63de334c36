"""Disk per finished train_multitask.py run: measured for MiniLM, estimated for bert-base.

    python bench/disk_per_run.py                      # this checkout
    python bench/disk_per_run.py --repo /tmp/old      # another checkout (e.g. before the lean run folder)

Runs the README's quick-start command with --limit 64 (checkpoint sizes depend on the model, not on how many
examples were seen; only the prediction files, a few KB, grow with the data) into a fresh --out_dir, then
lists what the folder holds. A run that was interrupted and resumed also held interrupted.pt, the size of
last.pt, before the lean run folder (it was never removed). bert-base is estimated from parameter counts: every file
that holds weights scales with 4 bytes per parameter (last.pt also holds AdamW's two moments: 3 copies), so
each file's size is multiplied by params(bert-base) / params(MiniLM) (task heads included in both).
"""

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from minbert.bert.config import BertConfig  # noqa: E402
from minbert.bert.model import BertModel  # noqa: E402

COMMAND = ["train_multitask.py", "--option", "finetune", "--model", "minilm-l6", "--pooling", "mean", "--lr", "1e-4",
           "--head_lr", "1e-3", "--batch_size", "32", "--hidden_dropout_prob", "0.1", "--epochs", "1", "--limit", "64"]


def params(config) -> int:
    return sum(p.numel() for p in BertModel(config).parameters())


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--repo", default=os.path.join(os.path.dirname(__file__), ".."), help="checkout to run")
    args = p.parse_args()
    out = Path(tempfile.mkdtemp(prefix="disk-per-run-")) / "run"
    env = dict(os.environ, HF_HUB_OFFLINE="1", OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    subprocess.run([sys.executable, *COMMAND, "--out_dir", str(out)], cwd=args.repo, env=env, check=True,
                   stdout=subprocess.DEVNULL)
    sizes = {q.name + ("/" if q.is_dir() else ""): (q.stat().st_size if q.is_file() else
                                                    sum(f.stat().st_size for f in q.rglob("*") if f.is_file()))
             for q in sorted(out.iterdir())}
    minilm = BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                        intermediate_size=1536)
    ratio = params(BertConfig()) / params(minilm)
    print(f"repo {os.path.abspath(args.repo)}; bert-base / MiniLM encoder parameters = {ratio:.2f}\n")
    print("| file | MiniLM (measured) | bert-base (estimated) |\n|---|---|---|")
    for name, size in sizes.items():
        scaled = size * ratio if size > 1_000_000 else size   # only the weight files scale
        print(f"| {name} | {size / 1e6:.1f} MB | {scaled / 1e6:.1f} MB |")
    total = sum(sizes.values())
    total_bb = sum(s * ratio if s > 1_000_000 else s for s in sizes.values())
    print(f"| **total** | **{total / 1e6:.1f} MB** | **{total_bb / 1e6:.0f} MB** |")
    if "last.pt" in sizes:
        extra = sizes["last.pt"]
        print(f"| + interrupted.pt left after a resume | {(total + extra) / 1e6:.1f} MB | "
              f"{(total_bb + extra * ratio) / 1e6:.0f} MB |")


if __name__ == "__main__":
    main()
