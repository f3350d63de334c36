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

Commands (CPU quick start, GPU at the paper's scale, resume after Ctrl-C): README "Quick start", docs/training.md.
"""

import functools
import json
import math
import os
import time
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
from minbert.core.device import autocast
from minbert.core.errors import DIVERGED, MAX_BAD_STEPS, UserError, cli
from minbert.core.export import MODEL_DIR, export
from minbert.core.report import markdown_table, plot_heads, write_jsonl
from minbert.methods.mml import LAMBDA, METHODS
from minbert.methods.mml_protocol import PAPER_METRIC, paper_epochs
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


def parse_args(argv=None):   # --dry_run prints every flag, its value and source, and exits
    return parser().parse(argv, glue, checkpoint, mml)


def score(task, out, gold) -> dict:
    """GLUE's metrics for `task` from Eq. 5 outputs: (N, K) probabilities, or (N,) values for STS-B."""
    pred = out if TASKS[task].num_labels == 1 else out.argmax(-1)
    return {m: float(getattr(metrics, m)(pred.numpy(), gold.numpy())) for m in TASKS[task].metrics}


def main(argv=None):   # the run folder (refuses a used --out_dir; a lean one at the end), Ctrl-C saves and exits
    return run_dir.main(parse_args(argv), "train_mml.py", experiment)


def experiment(args, stop):
    """Setup, data, model and optimizer; then train(), and the best model's cross-dataset scores."""
    # ------------------------------------------------------------------ setup (every input checked before work)
    flags.writable_dir(args.out_dir, "--out_dir")
    ck, device, fast = run_dir.start(args, "train_mml.py", f"task {args.task}, method {args.method}")   # --resume...
    if args.predict_only:   # no training: the run's model/, loaded as `python -m minbert predict` loads it
        return predict_only(args, stop, device) if distributed.is_main() else []

    # ------------------------------------------------------------------ data (tokenized once)
    tokenizer = Tokenizer.from_pretrained(args.model)
    load = functools.partial(glue_data, args, tokenizer)   # load(task, split)
    train_data, dev = load(args.task, "train"), load(args.task, "dev")
    print(f"{args.task}: train {len(train_data)}, dev {len(dev)}")
    if args.epochs is None:   # §4.2's 10/30/100 epochs for large/medium/small sets
        args.epochs = paper_epochs(len(train_data))
        print(f"--epochs not given: {args.epochs} for {len(train_data)} training examples "
              f"(minbert.methods.mml_protocol.EPOCHS_BY_SIZE)")

    # ------------------------------------------------------------------ model: encoder + M heads (+ eliminator)
    encoder = BertModel.from_pretrained(args.model)
    # regression (STS-B): every head's bias starts at the training labels' mean (minbert.methods.mml docstring)
    heads, eliminator = mml.from_args(args, encoder.config.hidden_size, TASKS[args.task].num_labels,
                                      train_data.labels)
    model = nn.ModuleDict({"encoder": encoder, "heads": heads})
    if eliminator is not None:   # an attribute of the model, so its buffers are in model.state_dict()
        model["eliminator"] = eliminator
    model.to(device).train()
    if args.compile:   # in place: state_dict keys unchanged
        compile_blocks(encoder, [heads])
        length_buckets.use_on(device, train_data, dev)   # CUDA: few static shapes
    spec = METHODS[args.method]
    print(f"{heads.num_heads} head(s), penalty {spec['penalty']}, elimination {spec['eliminate']}, "
          f"head dropout {spec['dropout']}"
          + ("" if heads.label_mean is None else f", head biases start at the label mean {heads.label_mean:.3f}"))

    # ------------------------------------------------------------------ optimizer, batch stream, the loop's state
    steps_per_epoch = math.ceil(len(train_data) / (args.batch_size * distributed.world_size()))
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, fused=fast.fused_adamw)
    objects = {   # what a checkpoint holds: each one's state_dict
        "model": model, "optimizer": optimizer,
        "scheduler": torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0),   # constant: the paper has none
        "scaler": torch.amp.GradScaler(device.type, enabled=args.amp == "fp16"),   # fp16 only; else passes through
        "stream": distributed.stream(train_data, args.batch_size, args.seed)}   # this rank's share of each batch
    # the loop's locals: fresh (trace: (step, active heads) after each step; the eliminations), or where ck stopped
    loop = checkpoint.restore(ck, objects, fresh_sums(), trace=[], events=[])
    del ck   # the checkpoint's tensors are in the model and optimizer now
    history = train(args, stop, loop, objects, spec, dev, eval_batch(args.batch_size), device, steps_per_epoch)

    # ------------------------------------------------------------------ cross-dataset scores of the best model
    if not distributed.is_main():
        return history
    best = os.path.join(args.out_dir, "best.pt")
    model.load_state_dict(checkpoint.load(best)["model"])
    headline = PAPER_METRIC[args.task]
    # the best model as a complete folder: --model RUN_DIR/model loads it in either script, --predict_only reads it
    export(os.path.join(args.out_dir, MODEL_DIR), encoder, tokenizer, {"heads": heads},
           {"model": args.model, "args": vars(args), "best_dev": max(history, key=lambda r: r[headline])},
           "train_mml.py", trained_run.model_args("train_mml.py", args, encoder.config.hidden_size))
    checkpoint.share_weights(best, os.path.join(args.out_dir, MODEL_DIR))   # one copy: best.pt names model/
    cross_dataset(args, stop, lambda data: predict(model, data, args, device), load, args.out_dir)
    print("\n" + markdown_table(history, ["epoch", *TASKS[args.task].metrics, "loss_task", "loss_mv", "active_heads",
                                           "elapsed_s"]))
    print(f"best dev {headline} {max(r[headline] for r in history):.4f}; {len(loop['events'])} elimination event(s); "
          f"the best model has {int(heads.active.sum())}/{heads.num_heads} heads active")
    plot_heads(os.path.join(args.out_dir, "heads.png"), loop["trace"], loop["events"], heads.num_heads)
    return history


def train(args, stop, loop, objects, spec, dev, eval_bs, device, steps_per_epoch):
    """The epochs: steps, then dev scores, best.pt, last.pt. Returns the epochs' records."""
    model, optimizer, scheduler, scaler, stream = objects.values()
    heads, eliminator = model["heads"], model["eliminator"] if "eliminator" in model else None
    amp = autocast(device, args.amp)   # the --amp context of every forward (a no-op for off), built once
    sync = distributed.Sync(model, device)   # DDP under torchrun (broadcasts rank 0's weights), else nothing
    examples = args.batch_size * distributed.world_size()   # a step's, on every rank
    epoch, step, best, history, elapsed_s, sums, seen, window, trace, events = loop.values()   # the loop's state
    started, bad_steps = time.perf_counter() - elapsed_s, 0   # bad_steps: non-finite steps in a row
    steps_log, writer = progress.start(args, (epoch - 1) * steps_per_epoch + step)   # steps.jsonl, TensorBoard

    def resume_state():   # last.pt and interrupted.pt
        return checkpoint.state(objects, {"epoch": epoch, "step": step, "best": best, "history": history, "elapsed_s":
                                          time.perf_counter() - started, "sums": sums, "seen": seen, "window": window,
                                          "trace": trace, "events": events}, args)
    # ------------------------------------------------------------------ training loop
    with stop.saving(os.path.join(args.out_dir, "interrupted.pt"), lambda path: checkpoint.save(path, resume_state())):
        while epoch <= args.epochs:
            mark = time.perf_counter()   # the step's time, evaluation left out
            for step in progress.bar(range(step, steps_per_epoch), f"epoch {epoch}/{args.epochs}", steps_per_epoch,
                                     step, args.log_seconds):   # a bar, or a progress line every --log_seconds
                # 0) Ctrl-C/SIGTERM during the last step (on any rank): stop here; stop.saving writes interrupted.pt
                if distributed.any_rank(stop.signal is not None) if sync.ddp else stop.signal:
                    raise interrupt.Interrupted(stop.signal or "a signal on another rank")
                done = (epoch - 1) * steps_per_epoch + step + 1   # optimizer steps of the run, this one included
                # 1) forward and loss: Eq. 3's task loss over the heads, plus λ·L_mv (Eq. 4) for mml/mv
                batch = to_device(stream.next(), device)
                with amp:
                    outputs = forward(model, batch)                             # (B, M, K)
                loss, per_head = heads.task_loss(outputs, batch["labels"], args.head_reduction)
                mv = heads.multiverse_loss() if spec["penalty"] else torch.zeros((), device=device)
                values = {"task": loss.item(), "mv": mv.item()}
                if finite := all(math.isfinite(v) for v in values.values()):   # the means count finite steps only
                    for s in (sums, window):
                        s.update({k: [s[k][0] + v, s[k][1] + 1] for k, v in values.items()})
                else:   # never written into the weights: 3) skips the update
                    tqdm.write(f"non-finite loss at epoch {epoch} step {step} (ids {batch['ids'][:3]})")
                # 2) backward (fp16: of the scaled-up loss); torchrun: the gradients are averaged across ranks in it
                loss = loss + LAMBDA * mv
                scaler.scale(sync.before_backward(loss) if sync.ddp else loss).backward()
                # 3) the update, skipped on all ranks if a loss was not finite on any (fp16: or gradients overflowed)
                finite = not distributed.any_rank(not finite) if sync.ddp else finite
                scaler.unscale_(optimizer)   # the true gradients, for the log's norm (in the optimizer's order)
                norm = torch.nn.utils.get_total_norm([p.grad for g in optimizer.param_groups for p in g["params"]
                                                      if p.grad is not None])
                if finite or scaler.is_enabled():
                    scaler.step(optimizer)   # optimizer.step(), unless fp16 gradients overflowed
                scaler.update()
                optimizer.zero_grad(set_to_none=True)
                bad_steps = 0 if finite else bad_steps + 1
                if bad_steps == MAX_BAD_STEPS:   # a diverged run, not a bad batch
                    raise UserError(DIVERGED.format(n=MAX_BAD_STEPS, out_dir=args.out_dir))
                if eliminator is not None:   # 4) Algorithm 1: the moving averages; every K steps, MeanShift elimination
                    if finite:
                        eliminator.observe(distributed.mean_over_ranks(per_head))   # the same averages on every rank
                    if event := eliminator.maybe_eliminate(done):
                        events.append({"epoch": epoch, **event, "active_after": int(heads.active.sum())})
                        if distributed.is_main():
                            write_jsonl(os.path.join(args.out_dir, "eliminations.jsonl"), events)
                        tqdm.write(f"step {done}: eliminated {len(event['eliminated'])} heads, "
                                   f"{events[-1]['active_after']} active")
                trace.append((done, int(heads.active.sum())))
                # 5) the log: this epoch's training time and examples; every --log_every steps a line and a record
                now = time.perf_counter()
                seen, mark = [seen[0] + now - mark, seen[1] + examples], now
                if done % args.log_every == 0 and distributed.is_main():
                    progress.write(progress.record(done, epoch, scheduler.get_last_lr(), window, seen, norm,
                                                   now - started), steps_log, writer)   # a line, steps.jsonl, TB
                    window = fresh_sums()
                scheduler.step()   # 6) the next step's learning rate; after a skipped update too (resumes see the same)
            step = steps_per_epoch

            # ---------------------------------------------------------- dev evaluation, metrics, best.pt, last.pt
            with stop.abortable():   # changes no training state: a signal abandons it, resume redoes it
                scores = distributed.on_main(lambda: score(args.task, predict(model, dev, args, device), dev.labels))
            history.append({"epoch": epoch, **{k: round(v, 4) for k, v in scores.items()},
                            **progress.epoch_record(sums, seen, time.perf_counter() - started),   # losses, ex/s, time
                            "active_heads": int(heads.active.sum())})
            progress.epoch_end(args.out_dir, history, writer, epoch * steps_per_epoch)   # metrics.jsonl, a line
            if scores[PAPER_METRIC[args.task]] > best:   # best.pt: this model's weights and scores (the paper's metric)
                best = scores[PAPER_METRIC[args.task]]
                checkpoint.save_weights(os.path.join(args.out_dir, "best.pt"), model, args, scores=scores)
            epoch, step, sums, seen, window = epoch + 1, 0, fresh_sums(), [0.0, 0], fresh_sums()
            checkpoint.save_last(args.out_dir, resume_state())   # the next epoch from step 0
    return history


def fresh_sums() -> dict:
    """{name: [loss sum, count]}, the epoch's or since the last record, before the first loss."""
    return {"task": [0.0, 0], "mv": [0.0, 0]}


def forward(model, batch) -> torch.Tensor:
    """(B, M, K) outputs of every head on the pooled [CLS] vector d (B, D)."""
    d = model["encoder"](batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]
    return model["heads"](d)


def predict(model, data, args, device) -> torch.Tensor:
    """Eq. 5 outputs (heads.predict) for a whole split, in file order: (N, K) probabilities or (N,) values."""
    model.eval()
    out = in_order({"score": data}, lambda _, batch: forward(model, batch), device, args.amp,
                   eval_batch(args.batch_size), "score", after=model["heads"].predict)["score"].outputs
    model.train()
    return out


def glue_data(args, tokenizer, task: str, split: str) -> TaskData:
    """`task`'s `split` from --glue_dir, at most --limit examples, cut to --max_seq_len."""
    return TaskData(read_glue(args.glue_dir, task, split)[: args.limit or None], tokenizer, args.max_seq_len)


def predict_only(args, stop, device) -> list:
    """--predict_only: the model/ of the run in --resume, loaded as `python -m minbert predict` loads it: its dev
    scores and --eval_tasks."""
    trained = trained_run.load_run(args.resume, str(device), args.amp, eval_batch(args.batch_size),
                                   script="train_mml.py")
    if trained.task != args.task:
        raise UserError(f"--predict_only --resume {args.resume}: that run was trained on {trained.task}, not --task "
                        f"{args.task}; give --task {trained.task}")
    args.max_seq_len = trained.max_seq_len
    load = functools.partial(glue_data, args, trained.tokenizer)
    cross_dataset(args, stop, trained.scores, load, args.resume, dev=load(args.task, "dev"))
    return []


def cross_dataset(args, stop, predict, load, source, dev=None) -> None:
    """--predict_only's dev scores (`dev`), and the model's scores on --eval_tasks in its category's binary space.
    `predict(data)`: Eq. 5's outputs in input order; the model is safe in the run folder `source`."""
    cross = {}
    with interrupt.model_kept(source, "scoring", "scores it"), stop.abortable():
        if dev is not None:
            print(f"{source}: dev {score(args.task, predict(dev), dev.labels)}")
        for task in args.eval_tasks:
            cross[task] = {}
            for split in ("train", "dev"):
                try:
                    data = load(task, split)
                except UserError as e:   # e.g. QNLI shipped without train.tsv
                    cross[task][split] = {"skipped": str(e).split(". ")[0]}
                    print(f"cross-dataset {task}/{split}: skipped ({cross[task][split]['skipped']})")
                    continue
                pred = category_prediction(args.task, predict(data)).numpy()            # (N,) in {0, 1}
                gold = to_category_labels(task, data.labels)
                cross[task][split] = {"accuracy": float(metrics.accuracy(pred, gold)),
                                      "f1": float(metrics.f1(pred, gold)), "n": len(data)}
                print(f"cross-dataset {args.task} -> {task}/{split}: {cross[task][split]}")
    if args.eval_tasks:
        text = json.dumps({"train_task": args.task, "method": args.method, "results": cross}, indent=1)
        path = (run_dir.fresh_path if args.predict_only else Path)(Path(args.out_dir) / "cross_dataset.json")
        atomic_write(path, lambda tmp: Path(tmp).write_text(text))   # --predict_only: beside the run's, not over it


if __name__ == "__main__":
    cli(main)
