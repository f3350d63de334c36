"""Fine-tune BERT on one GLUE task with Maximal Multiverse Learning (MML) or one of its baselines.

Paper: Malkiel & Wolf, EACL 2021 (arXiv:1911.06182); the heads, losses and elimination live in
minbert/mml.py. One flag picks the method (minbert.mml.METHODS):
    mml        M heads (default D), multiverse penalty λ·L_mv, MeanShift head elimination
    bert       one linear head, dropout 0.1 before it          bert-drop  the same, dropout 0.3
    mv         M heads + penalty, no elimination (MV-5 = --method mv --heads 5)
    ensemble   M heads, no penalty, no elimination (BERT-Ensemble = --method ensemble --heads 1024)
Choices: the heads read BERT's pooler output (tanh(W·h_[CLS]), what run_classifier.py and
BertForSequenceClassification classify), so bert here is the usual BERT fine-tune. Encoder
dropout is the checkpoint's (0.1); head dropout comes from METHODS. Adam (AdamW with weight decay
0 by default), constant lr, as the paper states no schedule. Prediction: softmax of the mean of
the active heads' logits (Eq. 5). The best epoch is chosen by the task's metric in the paper
(minbert.mml.PAPER_METRIC: accuracy, CoLA Matthews, STS-B Spearman); --epochs defaults to its
10/30/100 rule (minbert.mml.paper_epochs). After training, the best model is scored on
--eval_tasks in the binary space its category shares (minbert.glue.category_prediction):
cross_dataset.json.

GPU, full RTE (python -m minbert.download glue first):
    python train_mml.py --task RTE --method mml --amp bf16 --epochs 30 --eval_tasks QNLI,MNLI
CPU smoke run with the packaged MiniLM (a few minutes):
    python train_mml.py --task RTE --method mml --model minilm-l6 --glue_dir ../shared/data/glue \
        --limit 400 --epochs 2 --eliminate_every 10 --amp bf16 --eval_tasks QNLI
Resume after Ctrl-C or a crash: the same command plus --resume runs/mml/last.pt (or interrupted.pt)
"""

import json
import math
import os
import time
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

from minbert import checkpoint, distributed, fast_paths, flags, interrupt, metrics
from minbert.adamw import AdamW
from minbert.compiled import compile_blocks
from minbert.data import TaskData
from minbert.device import AMP_CHOICES, autocast, grad_scaler, resolve_amp, rng_state, seed_everything, set_rng_state
from minbert.errors import UserError, cli
from minbert.export import MODEL_DIR, export
from minbert.flags import at_least, between, positive, writable_dir
from minbert.glue import DEFAULT_GLUE_DIR, TASKS, category_prediction, read_glue, to_category_labels
from minbert.interrupt import EXIT_STATUS, Interrupted
from minbert.mml import LAMBDA, METHODS, PAPER_METRIC, HeadEliminator, MultiverseHeads, paper_epochs, resolve_num_heads
from minbert.model import BertModel, atomic_write
from minbert.multitask import to_device
from minbert.report import markdown_table, write_jsonl
from minbert.tokenizer import Tokenizer


def parse_args(argv=None):
    p = flags.ArgumentParser(description=__doc__)
    # --- what to train
    p.add_argument("--task", required=True, choices=list(TASKS), help="GLUE task to fine-tune on; STS-B* is STS-B binarised (<=2 vs >=4)")
    p.add_argument("--method", choices=list(METHODS), default="mml", help="mml, or a baseline of the paper's Table 1 (see the docstring)")
    p.add_argument("--heads", type=at_least(1), default=None, help="M for mml/mv/ensemble (default: hidden size D, e.g. 768); MV-5 is --method mv --heads 5")
    p.add_argument("--head_reduction", choices=["sum", "mean"], default="sum", help="sum is Eq. 3 (λ was tuned for it); mean divides by the active-head count")
    p.add_argument("--eliminate_every", type=at_least(1), default=1000, help="K: steps between MeanShift elimination rounds (mml only); lower it for short runs")
    p.add_argument("--min_bandwidth", type=at_least(0.0, float), default=0.05, help="MeanShift bandwidth floor in loss units: gaps smaller than this are noise")
    p.add_argument("--model", default="bert-base-uncased", help="hub name, local checkpoint dir, or 'minilm-l6' (offline)")
    # --- optimisation (paper: Adam, lr 2e-5, batch 32, 10/30/100 epochs for large/medium/small sets)
    p.add_argument("--epochs", type=at_least(1), default=None, help="passes over the training set; default the paper's rule: 10 / 30 / 100 for >= 100k / >= 10k / fewer train examples (after --limit)")
    p.add_argument("--lr", type=positive, default=2e-5, help="constant learning rate; MiniLM likes ~5e-5")
    p.add_argument("--weight_decay", type=at_least(0.0, float), default=0.0, help="decoupled decay; 0 makes AdamW the paper's Adam")
    p.add_argument("--batch_size", type=at_least(1), default=32, help="examples per optimizer step")
    p.add_argument("--max_seq_len", type=between(5, 512, int), default=128, help="truncate pairs (longest first) to this many tokens")
    # --- machine
    p.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:1, mps")
    p.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                   help="mixed precision. auto: bf16 on GPUs and CPUs with native bf16, fp16 on older GPUs, off elsewhere "
                        "(bf16 on a CPU without AMX/AVX512-BF16 is ~30x slower); the choice is printed")
    p.add_argument("--compile", action="store_true", help="torch.compile the encoder blocks and heads: faster steps after a one-off compile (needs a C++ compiler on CPU)")
    fast_paths.add_args(p)
    p.add_argument("--seed", type=int, default=1, help="seeds heads, dropout and batch order; report mean ± std over several")
    # --- data and outputs
    p.add_argument("--glue_dir", default=DEFAULT_GLUE_DIR, help="folder with GLUE's layout (TASK/train.tsv, dev.tsv)")
    p.add_argument("--limit", type=at_least(0), default=0, help="use at most N examples per split, eval tasks included (smoke runs)")
    p.add_argument("--eval_tasks", default="", help="comma list of same-category tasks to score the best model on, e.g. QNLI,MNLI")
    p.add_argument("--out_dir", default="runs/mml", help="best.pt, last.pt, metrics.jsonl, eliminations.jsonl, heads.png, cross_dataset.json")
    p.add_argument("--resume", default=None, help="continue from last.pt or interrupted.pt written by this script")
    p.add_argument("--predict_only", action="store_true",
                   help="no training: score the model in --resume (best.pt or last.pt) on dev and --eval_tasks")
    args = p.parse_args(argv)
    args.eval_tasks = [t for t in args.eval_tasks.split(",") if t]
    category = TASKS[args.task].category
    for t in args.eval_tasks:
        if t not in TASKS or TASKS[t].category is None or TASKS[t].category != category:
            p.error(f"--eval_tasks {t}: must be a task of {args.task}'s category ({category}); "
                    f"candidates: {[n for n, i in TASKS.items() if i.category == category and category]}")
    if args.method in ("bert", "bert-drop") and args.heads not in (None, 1):
        p.error(f"--method {args.method} has one head; drop --heads")
    if args.predict_only and not args.resume:
        p.error("--predict_only needs --resume CHECKPOINT (e.g. runs/mml/best.pt)")
    return args


# Flags that may differ between a run and its --resume: where things are, not what is trained.
RESUME_MAY_DIFFER = {"resume", "predict_only", "device", "fast_paths", "amp", "glue_dir", "out_dir", "eval_tasks"}


def score(task, out, gold) -> dict:
    """GLUE's metrics for `task` from Eq. 5 outputs: (N, K) probabilities, or (N,) values for STS-B."""
    pred = out if TASKS[task].num_labels == 1 else out.argmax(-1)
    return {m: float(getattr(metrics, m)(pred.numpy(), gold.numpy())) for m in TASKS[task].metrics}


def main(argv=None):
    args = parse_args(argv)
    # Ctrl-C / SIGTERM: finish the step, save, exit (minbert/interrupt.py). Under torchrun every rank must stop
    # at the same step, so no phase is abortable there and the ranks agree at each step boundary.
    return interrupt.run(train, args, abortable=distributed.world_size() == 1, agree=distributed.any_rank)


def train(args, stop):
    # ------------------------------------------------------------------ setup (every input checked before work)
    writable_dir(args.out_dir, "--out_dir")
    ck = checkpoint.load_for_resume(args, RESUME_MAY_DIFFER, "train_mml.py") if args.resume else None
    seed_everything(args.seed)
    device = distributed.setup(args.device)   # + process group under torchrun
    args.amp, amp_reason = resolve_amp(args.amp, device)
    spec = METHODS[args.method]
    print(f"device {device}, amp {args.amp} ({amp_reason}), model {args.model}, task {args.task}, method {args.method}")
    fast = fast_paths.from_args(args, device)
    print(f"fast paths: {fast}")

    # ------------------------------------------------------------------ data (tokenized once)
    tokenizer = Tokenizer.from_pretrained(args.model)

    def load(task, split):
        return TaskData(read_glue(args.glue_dir, task, split)[: args.limit or None], tokenizer, args.max_seq_len)

    train, dev = load(args.task, "train"), load(args.task, "dev")
    print(f"{args.task}: train {len(train)}, dev {len(dev)}")
    if args.epochs is None:   # §4.2's 10/30/100 epochs for large/medium/small sets
        args.epochs = paper_epochs(len(train))
        print(f"--epochs not given: {args.epochs} for {len(train)} training examples (minbert.mml.EPOCHS_BY_SIZE)")

    # ------------------------------------------------------------------ model: encoder + M heads (+ eliminator)
    encoder = BertModel.from_pretrained(args.model)
    num_heads = resolve_num_heads(args.method, encoder.config.hidden_size, args.heads)
    heads = MultiverseHeads(encoder.config.hidden_size, TASKS[args.task].num_labels, num_heads, dropout=spec["dropout"])
    model = nn.ModuleDict({"encoder": encoder, "heads": heads})
    if spec["eliminate"]:   # an attribute of the model, so its buffers are in model.state_dict()
        model["eliminator"] = HeadEliminator(heads, every=args.eliminate_every, min_bandwidth=args.min_bandwidth)
    eliminator = model["eliminator"] if spec["eliminate"] else None
    model.to(device).train()
    if args.compile:   # in place: state_dict keys unchanged
        compile_blocks(encoder, [heads])
    sync = distributed.Sync(model, device)   # DDP under torchrun, else does nothing
    print(f"{num_heads} head(s), penalty {spec['penalty']}, elimination {spec['eliminate']}, head dropout {spec['dropout']}")

    def forward(batch):
        """(B, M, K) outputs of every head on the pooled [CLS] vector d (B, D)."""
        d = encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]
        return heads(d)

    @torch.inference_mode()
    def run(data):
        """Eq. 5 outputs for a whole split, in file order: (N, K) probabilities or (N,) values."""
        model.eval()
        outs = [None] * len(data)
        for batch in data.batches(max(64, args.batch_size), shuffle=False):
            with autocast(device, args.amp):
                outputs = forward(to_device(batch, device))                     # (B, M, K)
            out = heads.predict(outputs.float()).cpu()     # Eq. 5 in fp32 (autocast would round the mean to bf16)
            for i, o in zip(batch["index"].tolist(), out):
                outs[i] = o
        model.train()
        return torch.stack(outs)

    # ------------------------------------------------------------------ optimizer, batch stream
    steps_per_epoch = math.ceil(len(train) / (args.batch_size * distributed.world_size()))
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, fused=fast.fused_adamw)
    scaler = grad_scaler(device, args.amp)
    stream = distributed.stream(train, args.batch_size, args.seed)   # this rank's share of each batch

    def full_state(epoch, step):
        """Everything a resume needs, at a step boundary (the only place it is ever called)."""
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                "scaler": scaler.state_dict() if scaler else None, **distributed.gather_rng({"rng": rng_state()}),
                "stream": stream.state_dict(),
                "epoch": epoch, "step": step, "best": best, "history": history, "trace": trace, "events": events,
                "running": (loss_sum, mv_sum, n_steps), "args": vars(args)}

    best, history, trace, events, start_epoch, start_step = -math.inf, [], [], [], 1, 0
    loss_sum, mv_sum, n_steps = 0.0, 0.0, 0   # this epoch's task loss sum, L_mv sum, finite steps
    if ck is not None:
        model.load_state_dict(ck["model"])
        if args.predict_only:
            start_epoch = args.epochs + 1     # no training: straight to the scores below
        else:
            optimizer.load_state_dict(ck["optimizer"])
            if scaler and ck["scaler"]:
                scaler.load_state_dict(ck["scaler"])
            stream.load_state_dict(ck["stream"])
            set_rng_state(distributed.own_rng(ck))
            best, history, start_epoch, start_step = ck["best"], ck["history"], ck["epoch"], ck["step"]
            trace, events, (loss_sum, mv_sum, n_steps) = ck["trace"], ck["events"], ck["running"]
            print(f"resumed from {args.resume}: epoch {start_epoch}, step {start_step}, best {best:.4f}")
        del ck

    # ------------------------------------------------------------------ training loop
    # A signal during a step is handled at the next boundary (stop.check()); evaluation is abortable.
    t0, bad_steps, headline = time.time(), 0, PAPER_METRIC[args.task]   # best epoch by the paper's metric
    epoch, position = start_epoch, start_step
    stop.defer()
    try:
        for epoch in range(start_epoch, args.epochs + 1):
            bar = tqdm(range(start_step, steps_per_epoch), desc=f"epoch {epoch}/{args.epochs}", initial=start_step,
                       total=steps_per_epoch, disable=None if distributed.is_main() else True)
            for step in bar:
                position = step
                stop.check()
                global_step = (epoch - 1) * steps_per_epoch + step + 1
                batch = to_device(stream.next(), device)
                with autocast(device, args.amp):
                    outputs = forward(batch)                                    # (B, M, K)
                loss, per_head = heads.task_loss(outputs, batch["labels"], args.head_reduction)
                mv = heads.multiverse_loss() if spec["penalty"] else torch.zeros((), device=device)
                total = loss + LAMBDA * mv
                finite = not distributed.any_rank(not bool(torch.isfinite(total)))   # all ranks agree
                if finite:
                    total = sync.before_backward(total)
                    (scaler.scale(total) if scaler else total).backward()
                    if scaler:      # skips the step itself when the scaled gradients overflowed
                        scaler.step(optimizer)
                        scaler.update()
                    else:
                        optimizer.step()
                else:               # never write NaN/inf into the weights or the averages
                    tqdm.write(f"non-finite loss at epoch {epoch} step {step} (batch ids {batch['ids'][:3]}...)")
                optimizer.zero_grad(set_to_none=True)
                bad_steps = 0 if finite else bad_steps + 1
                if bad_steps >= 10:
                    raise UserError("10 optimizer steps in a row had a non-finite loss: lower --lr or use --amp off; "
                                    f"{args.out_dir}/last.pt holds the last finished epoch")
                if eliminator is not None:
                    if finite:
                        eliminator.observe(distributed.mean_over_ranks(per_head))   # same averages on all ranks
                    event = eliminator.maybe_eliminate(global_step)
                    if event:
                        events.append({"epoch": epoch, **event, "active_after": int(heads.active.sum())})
                        if distributed.is_main():
                            write_jsonl(os.path.join(args.out_dir, "eliminations.jsonl"), events)
                        tqdm.write(f"step {global_step}: eliminated {len(event['eliminated'])} heads, "
                                   f"{events[-1]['active_after']} active")
                trace.append((global_step, int(heads.active.sum())))
                if finite:
                    loss_sum, mv_sum, n_steps = loss_sum + loss.item(), mv_sum + mv.item(), n_steps + 1
                bar.set_postfix(loss=f"{loss_sum / max(n_steps, 1):.3f}", active=trace[-1][1])
            position, start_step = steps_per_epoch, 0

            # ---------------------------------------------------------- dev evaluation, best checkpoint
            with stop.abortable():   # changes no training state: a signal abandons it, resume redoes it
                scores = distributed.on_main(lambda: score(args.task, run(dev), dev.labels))
            record = {"epoch": epoch, **{k: round(v, 4) for k, v in scores.items()},
                      "loss_task": round(loss_sum / max(n_steps, 1), 4), "loss_mv": round(mv_sum / max(n_steps, 1), 4),
                      "active_heads": int(heads.active.sum()), "elapsed_s": round(time.time() - t0, 1)}
            history.append(record)
            if distributed.is_main():   # rank 0 alone writes files (checkpoint.save checks it itself)
                write_jsonl(os.path.join(args.out_dir, "metrics.jsonl"), history)
            tqdm.write(str(record))
            if scores[headline] > best:
                best = scores[headline]
                checkpoint.save(os.path.join(args.out_dir, "best.pt"), {"model": model.state_dict(), "args": vars(args), "scores": scores})
            loss_sum, mv_sum, n_steps = 0.0, 0.0, 0
            checkpoint.save(os.path.join(args.out_dir, "last.pt"), full_state(epoch + 1, 0))
            epoch, position = epoch + 1, 0
    except Interrupted as e:
        interrupt.save_and_exit(e, os.path.join(args.out_dir, "interrupted.pt"), full_state(epoch, position), epoch, position)

    # ------------------------------------------------------------------ cross-dataset scores of the best model
    if not distributed.is_main():
        return history
    source = args.resume if args.predict_only else os.path.join(args.out_dir, "best.pt")
    if not args.predict_only:
        model.load_state_dict(checkpoint.load(source)["model"])
        # the best model as a complete folder: --model RUN_DIR/model loads it in either script
        export(os.path.join(args.out_dir, MODEL_DIR), encoder, tokenizer, {"heads": heads},
               {"model": args.model, "args": vars(args), "best_dev": max(history, key=lambda r: r[headline])})
    cross = {}
    try:
        with stop.abortable():
            if args.predict_only:
                scores = score(args.task, run(dev), dev.labels)
                print(f"{source}: dev {scores}")
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
                    cross[task][split] = {"accuracy": float(metrics.accuracy(pred, gold)), "f1": float(metrics.f1(pred, gold)), "n": len(data)}
                    print(f"cross-dataset {args.task} -> {task}/{split}: {cross[task][split]}")
    except Interrupted:
        print(f"\ninterrupted while scoring; the model is in {source}: the same command plus --predict_only "
              f"--resume {source} scores it")
        raise SystemExit(EXIT_STATUS) from None
    if args.eval_tasks:
        report = {"train_task": args.task, "method": args.method, "results": cross}
        atomic_write(Path(args.out_dir) / "cross_dataset.json", lambda tmp: Path(tmp).write_text(json.dumps(report, indent=1)))
    if args.predict_only:
        return history

    # ------------------------------------------------------------------ summary and heads.png
    print("\n" + markdown_table(history, ["epoch", *TASKS[args.task].metrics, "loss_task", "loss_mv", "active_heads", "elapsed_s"]))
    print(f"best dev {headline} {best:.4f}; {len(events)} elimination event(s); "
          f"the best model has {int(heads.active.sum())}/{num_heads} heads active")
    plot_heads(os.path.join(args.out_dir, "heads.png"), trace, events, num_heads)
    return history


def plot_heads(path, trace, events, num_heads) -> bool:
    """Fig. 2: active heads per step with elimination events, and kept vs eliminated averages."""
    try:
        import matplotlib
        matplotlib.use("Agg")   # files only, no window
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib is not installed: no {path}")
        return False
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    a.step([0] + [s for s, _ in trace], [num_heads] + [n for _, n in trace], where="post")
    for e in events:
        a.axvline(e["step"], color="r", ls=":", lw=1)
    a.set(xlabel="step", ylabel="active heads Σβ", title="active heads (red: elimination)")
    for i, e in enumerate(events):   # one column per event, labelled by its step
        b.scatter([i] * len(e["kept_moving_avg"]), e["kept_moving_avg"], c="g", s=8, label="kept" if i == 0 else None)
        b.scatter([i] * len(e["eliminated_moving_avg"]), e["eliminated_moving_avg"], c="r", s=8,
                  label="eliminated" if i == 0 else None)
    b.set(xlabel="elimination event (step)", ylabel="moving-average loss a_j", title="heads at each event")
    if events:
        b.set_xticks(range(len(events)), [str(e["step"]) for e in events])
        b.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


if __name__ == "__main__":
    cli(main)
