"""python -m minbert export-hf RUN_DIR OUT_DIR: a run's task head as a Hugging Face BertForSequenceClassification.

    python -m minbert export-hf runs/mml runs/mml-hf                 # a train_mml.py run: its GLUE task
    python -m minbert export-hf runs/bert-base runs/sst-hf --task sst

and in Python: `transformers.pipeline("text-classification", model="runs/sst-hf")("A gorgeous film.")`.

BertForSequenceClassification classifies BERT's pooler output through dropout and one linear layer. A head of
that shape exports exactly (trained_run.py, hf_head): train_multitask.py's linear heads on the pooler output with
cross-encoded pairs (the defaults; SST-5 with the handout's label names, Quora as one sigmoid probability, STS as
a regression score), and every train_mml.py run (Eq. 5 averages the M heads' logits: one linear map). Other heads
(mean pooling, PALs, MLP heads, bi-encoder or tanh-scaled pair heads) are refused in one line, nothing written.
`--dry_run` makes every check the export makes (the run, its head, OUT_DIR) and says what it would write.
"""

import sys
from pathlib import Path

from minbert.core import flags
from minbert.core.errors import UserError
from minbert.core.export import export_hf_classifier


def parser():
    p = flags.ArgumentParser(prog="python -m minbert export-hf", description=__doc__)
    p.add_argument("run_dir", help="the --out_dir of a finished training run (or its model/ folder)")
    p.add_argument("out_dir", help="the new folder: config.json, model.safetensors, vocab.txt, tokenizer_config.json")
    p.add_argument("--task", default=None, help="which head of a multitask run: sst (default), para or sts; "
                                                "an MML run has one head, its own --task")
    p.add_argument("--overwrite", action="store_true", help="replace what --out_dir already holds (default: refuse)")
    return p


def main(argv=None):
    args = parser().parse(argv, sys.modules[__name__])   # --dry_run: describe(args) below, then exit
    run, task, head = checked(args)
    out = Path(args.out_dir)
    export_hf_classifier(out, run.folder, head["weight"], head["bias"], head["labels"], head["problem_type"],
                         run.max_seq_len)
    print(f"wrote {out}: {what(task, head)}; transformers.pipeline(\"text-classification\", model=\"{out}\") loads it")
    return out


def unused_out_dir(path, overwrite: bool) -> Path:
    """OUT_DIR of an export: refused (one line, nothing changed) when it holds anything, unless --overwrite."""
    out = Path(path)
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise UserError(f"{out} already exists and is not empty; nothing was changed. Choose another OUT_DIR, or "
                        f"add --overwrite to replace it")
    return out


def checked(args) -> tuple:
    """(run, task, head): every check of the export, before anything is written."""
    unused_out_dir(args.out_dir, args.overwrite)
    from minbert.tools.trained_run import load_run   # torch loads here, after the flags are checked
    run = load_run(args.run_dir, device="cpu", amp="off")
    task = args.task or run.tasks[0]
    return run, task, run.hf_head(task)   # hf_head: a UserError saying why, for a head of another shape


def describe(args) -> list[tuple[str, str]]:
    """--dry_run's rows: the export's own checks made, what it would write."""
    run, task, head = checked(args)
    return [("would write", f"{args.out_dir}: {what(task, head)}")]


def what(task: str, head: dict) -> str:
    return f"the {task} head as BertForSequenceClassification ({', '.join(head['labels'])})"

