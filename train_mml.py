"""Fine-tune BERT on one GLUE task with Maximal Multiverse Learning (MML) or one of its baselines.

Paper: Malkiel & Wolf, EACL 2021 (arXiv:1911.06182); the heads, losses and elimination live in
minbert/methods/mml.py. One flag picks the method (minbert.methods.mml.METHODS):
    mml        M heads (default D), multiverse penalty λ·L_mv, MeanShift head elimination
    bert       one linear head, dropout 0.1 before it          bert-drop  the same, dropout 0.3
    mv         M heads + penalty, no elimination (MV-5 = --method mv --heads 5)
    ensemble   M heads, no penalty, no elimination (BERT-Ensemble = --method ensemble --heads 1024)
Choices: the heads read BERT's pooler output (tanh(W·h_[CLS]), what run_classifier.py and
BertForSequenceClassification classify), so bert here is the usual BERT fine-tune. Encoder
dropout is the checkpoint's (0.1); head dropout comes from METHODS. Adam (AdamW with weight decay
0 by default), constant lr, as the paper states no schedule. Prediction: softmax of the mean of
the active heads' logits (Eq. 5). The best epoch is chosen by the task's metric in the paper
(minbert.methods.mml_protocol.PAPER_METRIC: accuracy, CoLA Matthews, STS-B Spearman); --epochs defaults to its
10/30/100 rule (minbert.methods.mml_protocol.paper_epochs). After training, the best model is scored on
--eval_tasks in the binary space its category shares (minbert.tasks.glue.category_prediction):
cross_dataset.json.

GPU, full RTE (python -m minbert download glue first):
    python train_mml.py --task RTE --method mml --amp bf16 --epochs 30 --eval_tasks QNLI,MNLI
CPU smoke run with the packaged MiniLM on the shipped RTE files (a few minutes):
    python train_mml.py --task RTE --method mml --model minilm-l6 --limit 400 --epochs 2 --eliminate_every 10
Resume after Ctrl-C or a crash: the same command plus --resume runs/mml/last.pt (or interrupted.pt)
"""

import functools
import json
import math
import os
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from minbert.adamw import AdamW
from minbert.core import flags, interrupt, progress
from minbert.methods import mml
from minbert.run import checkpoint, distributed, run_dir
from minbert.tasks import glue, length_buckets, metrics
from minbert.bert.compiled import compile_blocks
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.core.atomic import atomic_write
from minbert.core.device import autocast, grad_scaler
from minbert.core.errors import UserError, cli
from minbert.core.export import MODEL_DIR, export
from minbert.core.report import markdown_table, plot_heads, write_jsonl
from minbert.methods.mml import LAMBDA, METHODS
from minbert.methods.mml_protocol import PAPER_METRIC, paper_epochs
from minbert.run.optimizer_step import OptimizerStep
from minbert.tasks.glue import TASKS, category_prediction, read_glue, to_category_labels
from minbert.tasks.sampling import TaskData, to_device
from minbert.tasks.scoring import eval_batch, in_order
from minbert.tools import trained_run


def parser():
    p = flags.ArgumentParser(description=__doc__)
    g = p.add_argument_group("model and optimisation (paper: Adam, lr 2e-5, batch 32, 10/30/100 epochs)")
    g.add_argument("--model", default="bert-base-uncased",
                   help="hub name, local model folder, or 'minilm-l6' (offline)")
    g.add_argument("--epochs", type=flags.at_least(1), default=None,
                   help="default: the paper's rule, 10 / 30 / 100 for >= 100k / >= 10k / fewer train examples")
    g.add_argument("--lr", type=flags.positive, default=2e-5,
                   help="constant learning rate: the paper's 2e-5, which the README's MiniLM line uses too")
    g.add_argument("--weight_decay", type=flags.at_least(0.0, float), default=0.0,
                   help="decoupled decay; 0 makes AdamW the paper's Adam")
    g.add_argument("--batch_size", type=flags.at_least(1), default=32, help="examples per optimizer step")
    g.add_argument("--max_seq_len", type=flags.between(5, 512, int), default=128,
                   help="truncate pairs (longest first) to this many tokens")
    g.add_argument("--limit", type=flags.at_least(0), default=0,
                   help="use at most N examples per split, eval tasks included (smoke runs)")
    glue.add_args(p)
    run_dir.add_run_args(p, out_dir="runs/mml", seed=1)   # machine, run folder, resume, progress
    mml.add_args(p)
    return p


def parse_args(argv=None):
    p = parser()
    args = p.parse(argv, glue, checkpoint, mml)   # --dry_run prints every flag, its value and source, and exits
    return args


def score(task, out, gold) -> dict:
    """GLUE's metrics for `task` from Eq. 5 outputs: (N, K) probabilities, or (N,) values for STS-B."""
    pred = out if TASKS[task].num_labels == 1 else out.argmax(-1)
    return {m: float(getattr(metrics, m)(pred.numpy(), gold.numpy())) for m in TASKS[task].metrics}


def main(argv=None):
    args = parse_args(argv)
    # Ctrl-C / SIGTERM: finish the step, save, exit (minbert/core/interrupt.py). Under torchrun every rank must stop
    # at the same step, so no phase is abortable there and the ranks agree at each step boundary.
    with run_dir.RunDir(args, "train_mml.py"):   # refuses a used --out_dir; at the end: lean folder, summary
        return interrupt.run(train, args, abortable=not distributed.launched(), agree=distributed.any_rank)


def train(args, stop):
    # ------------------------------------------------------------------ setup (every input checked before work)
    flags.writable_dir(args.out_dir, "--out_dir")
    ck = checkpoint.load_for_resume(args, "train_mml.py") if args.resume and not args.predict_only else None
    device, fast = run_dir.start(args, ck, f"task {args.task}, method {args.method}")   # seed, device, amp, threads
    spec = METHODS[args.method]
    if args.predict_only:   # no training: the run's model/, loaded as `python -m minbert predict` loads it
        return predict_only(args, stop, device) if distributed.is_main() else []

    # ------------------------------------------------------------------ data (tokenized once)
    tokenizer = Tokenizer.from_pretrained(args.model)
    load = functools.partial(glue_data, args, tokenizer)   # load(task, split)
    train, dev = load(args.task, "train"), load(args.task, "dev")
    print(f"{args.task}: train {len(train)}, dev {len(dev)}")
    if args.epochs is None:   # §4.2's 10/30/100 epochs for large/medium/small sets
        args.epochs = paper_epochs(len(train))
        print(f"--epochs not given: {args.epochs} for {len(train)} training examples "
              f"(minbert.methods.mml_protocol.EPOCHS_BY_SIZE)")

    # ------------------------------------------------------------------ model: encoder + M heads (+ eliminator)
    encoder = BertModel.from_pretrained(args.model)
    # regression (STS-B): every head's bias starts at the training labels' mean (minbert.methods.mml docstring)
    heads, eliminator = mml.from_args(args, encoder.config.hidden_size, TASKS[args.task].num_labels, train.labels)
    model = nn.ModuleDict({"encoder": encoder, "heads": heads})
    if eliminator is not None:   # an attribute of the model, so its buffers are in model.state_dict()
        model["eliminator"] = eliminator
    model.to(device).train()
    if args.compile:   # in place: state_dict keys unchanged
        compile_blocks(encoder, [heads])
        length_buckets.use_on(device, train, dev)   # CUDA: few static shapes
    sync = distributed.Sync(model, device)   # DDP under torchrun, else does nothing
    print(f"{heads.num_heads} head(s), penalty {spec['penalty']}, elimination {spec['eliminate']}, "
          f"head dropout {spec['dropout']}"
          + ("" if heads.label_mean is None else f", head biases start at the label mean {heads.label_mean:.3f}"))

    def forward(batch):
        """(B, M, K) outputs of every head on the pooled [CLS] vector d (B, D)."""
        d = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]
        return heads(d)

    def run(data):
        """Eq. 5 outputs (heads.predict) for a whole split, in file order: (N, K) probabilities or (N,) values."""
        model.eval()
        out = in_order({"score": data}, lambda _, batch: forward(batch), device, args.amp,
                       eval_batch(args.batch_size), "score", after=heads.predict)["score"].outputs
        model.train()
        return out

    # ------------------------------------------------------------------ optimizer, batch stream, resumable state
    steps_per_epoch = math.ceil(len(train) / (args.batch_size * distributed.world_size()))
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, fused=fast.fused_adamw)
    update = OptimizerStep(optimizer, None, grad_scaler(device, args.amp), args.out_dir)   # no schedule: the paper's
    stream = distributed.stream(train, args.batch_size, args.seed)   # this rank's share of each batch
    loop = checkpoint.LoopState(running={"task": [0.0, 0], "mv": [0.0, 0]},   # epoch, step, best, history, loss sums
                                extra={"trace": [], "events": []})   # (step, active heads) per step; eliminations
    log = progress.Log(args, update, loop, steps_per_epoch)   # bar, steps.jsonl, --report_to, time across resumes
    parts = {"model": model, "optimizer": optimizer, "scaler": update.scaler, "stream": stream, "log": log}   # resume
    if ck is not None:
        checkpoint.restore(ck, parts, loop)   # the parts' states, every RNG, the loop's position
        del ck
    trace, events = loop.extra["trace"], loop.extra["events"]

    # ------------------------------------------------------------------ training loop
    headline = PAPER_METRIC[args.task]   # the best epoch by the paper's metric
    with stop.saving(os.path.join(args.out_dir, "interrupted.pt"),   # a Ctrl-C saves the last step boundary
                     lambda path: checkpoint.save(path, checkpoint.resume_state(parts, loop, args))):
        for epoch in loop.epochs(args.epochs):
            for step in log.steps(epoch):   # under a bar, or with progress lines in a log
                loop.step = step   # where a resume starts
                stop.check()       # 0) Ctrl-C/SIGTERM during the last step stops here: interrupted.pt, exit (above)
                global_step = (epoch - 1) * steps_per_epoch + step + 1
                # 1) forward and loss: Eq. 3's task loss over the heads, plus λ·L_mv (Eq. 4) for mml/mv
                batch = to_device(stream.next(), device)
                with autocast(device, args.amp):
                    outputs = forward(batch)                                    # (B, M, K)
                loss, per_head = heads.task_loss(outputs, batch["labels"], args.head_reduction)
                mv = heads.multiverse_loss() if spec["penalty"] else torch.zeros((), device=device)
                finite = progress.add_losses(loop.running, {"task": loss, "mv": mv})   # the epoch's means: finite only
                if not finite:     # never written into the weights or the averages
                    log.print(f"non-finite loss at epoch {epoch} step {step} (batch ids {batch['ids'][:3]}...)")
                # 2) backward and the optimizer step
                update.backward(sync.before_backward(loss + LAMBDA * mv))
                finite = update(finite)
                # 3) method hook: Algorithm 1's moving averages and, every K steps, MeanShift elimination
                if eliminator is not None:
                    eliminate(eliminator, per_head if finite else None, global_step, epoch, heads, events, args)
                trace.append((global_step, int(heads.active.sum())))
                log.step(args.batch_size * distributed.world_size(), active=trace[-1][1])   # 4) the log
            loop.step = steps_per_epoch

            # ---------------------------------------------------------- dev evaluation, metrics, best.pt, last.pt
            with stop.abortable():   # changes no training state: a signal abandons it, resume redoes it
                scores = distributed.on_main(lambda: score(args.task, run(dev), dev.labels))
            loop.history.append({"epoch": epoch, **{k: round(v, 4) for k, v in scores.items()},
                                 **log.epoch_record(), "active_heads": int(heads.active.sum())})   # + losses, ex/s
            log.epoch_end(loop.history)   # console, metrics.jsonl, TensorBoard
            if loop.improved(scores[headline]):   # best.pt: this model's weights and scores
                checkpoint.save_weights(os.path.join(args.out_dir, "best.pt"), model, args, scores=scores)
            loop.next_epoch()
            checkpoint.save_last(args.out_dir, checkpoint.resume_state(parts, loop, args))   # the next epoch from 0

    # ------------------------------------------------------------------ cross-dataset scores of the best model
    if not distributed.is_main():
        return loop.history
    best = os.path.join(args.out_dir, "best.pt")
    model.load_state_dict(checkpoint.load(best)["model"])
    # the best model as a complete folder: --model RUN_DIR/model loads it in either script, --predict_only reads it
    export(os.path.join(args.out_dir, MODEL_DIR), encoder, tokenizer, {"heads": heads},
           {"model": args.model, "args": vars(args), "best_dev": max(loop.history, key=lambda r: r[headline])},
           "train_mml.py", trained_run.model_args("train_mml.py", args, encoder.config.hidden_size))
    checkpoint.share_weights(best, os.path.join(args.out_dir, MODEL_DIR))   # one copy: best.pt names model/
    cross_dataset(args, stop, run, load, args.out_dir)
    summary(args, loop, trace, events, heads)   # the epochs' table, the best score, heads.png
    return loop.history


def summary(args, loop, trace, events, heads) -> None:
    print("\n" + markdown_table(loop.history, ["epoch", *TASKS[args.task].metrics, "loss_task", "loss_mv",
                                               "active_heads", "elapsed_s"]))
    print(f"best dev {PAPER_METRIC[args.task]} {loop.best:.4f}; {len(events)} elimination event(s); "
          f"the best model has {int(heads.active.sum())}/{heads.num_heads} heads active")
    plot_heads(os.path.join(args.out_dir, "heads.png"), trace, events, heads.num_heads)


def eliminate(eliminator, per_head, global_step, epoch, heads, events, args) -> None:
    """Feed this step's per-head losses (None: a non-finite step) to the moving averages, and log an elimination."""
    if per_head is not None:
        eliminator.observe(distributed.mean_over_ranks(per_head))   # the same averages on every rank
    event = eliminator.maybe_eliminate(global_step)
    if event:
        events.append({"epoch": epoch, **event, "active_after": int(heads.active.sum())})
        if distributed.is_main():
            write_jsonl(os.path.join(args.out_dir, "eliminations.jsonl"), events)
        tqdm.write(f"step {global_step}: eliminated {len(event['eliminated'])} heads, "
                   f"{events[-1]['active_after']} active")


def glue_data(args, tokenizer, task: str, split: str) -> TaskData:
    """`task`'s `split` from --glue_dir, at most --limit examples, cut to --max_seq_len."""
    return TaskData(read_glue(args.glue_dir, task, split)[: args.limit or None], tokenizer, args.max_seq_len)


def predict_only(args, stop, device) -> list:
    """--predict_only: the model/ of the run in --resume (a run folder, or a file in it), loaded and checked as
    `python -m minbert predict` loads it (minbert/tools/trained_run.py): its dev scores and --eval_tasks."""
    run = trained_run.load_run(args.resume, str(device), args.amp, eval_batch(args.batch_size), script="train_mml.py")
    if run.task != args.task:
        raise UserError(f"--predict_only --resume {args.resume}: that run was trained on {run.task}, not --task "
                        f"{args.task}; give --task {run.task}")
    args.max_seq_len = run.max_seq_len
    load = functools.partial(glue_data, args, run.tokenizer)
    cross_dataset(args, stop, run.scores, load, args.resume, dev=load(args.task, "dev"))
    return []


def cross_dataset(args, stop, run, load, source, dev=None) -> None:
    """--predict_only's dev scores (`dev`), and the model's scores on --eval_tasks in its category's binary space.
    `run(data)`: Eq. 5's outputs in input order; the model is safe in the run folder `source`."""
    cross = {}
    try:
        with stop.abortable():
            if dev is not None:
                print(f"{source}: dev {score(args.task, run(dev), dev.labels)}")
            for task in args.eval_tasks:
                cross[task] = {}
                for split in ("train", "dev"):
                    try:
                        data = load(task, split)
                    except UserError as e:   # e.g. QNLI shipped without train.tsv
                        cross[task][split] = {"skipped": str(e).split(". ")[0]}
                        print(f"cross-dataset {task}/{split}: skipped ({cross[task][split]['skipped']})")
                        continue
                    pred = category_prediction(args.task, run(data)).numpy()            # (N,) in {0, 1}
                    gold = to_category_labels(task, data.labels)
                    cross[task][split] = {"accuracy": float(metrics.accuracy(pred, gold)),
                                          "f1": float(metrics.f1(pred, gold)), "n": len(data)}
                    print(f"cross-dataset {args.task} -> {task}/{split}: {cross[task][split]}")
    except interrupt.Interrupted:
        print(f"\ninterrupted while scoring; the model is in {source}: the same command plus --predict_only "
              f"--resume {source} scores it")
        raise SystemExit(interrupt.EXIT_STATUS) from None
    if args.eval_tasks:
        text = json.dumps({"train_task": args.task, "method": args.method, "results": cross}, indent=1)
        path = (run_dir.fresh_path if args.predict_only else Path)(Path(args.out_dir) / "cross_dataset.json")
        atomic_write(path, lambda tmp: Path(tmp).write_text(text))   # --predict_only: beside the run's, not over it


if __name__ == "__main__":
    cli(main)
