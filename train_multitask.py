"""Multitask fine-tuning of BERT on the CS224N tasks: SST-5 sentiment, Quora paraphrase, STS.

One shared encoder, three heads (minbert/tasks/multitask.py). Each optimizer step takes a batch of one
task, chosen by a schedule (minbert/tasks/sampling.py); after every epoch the dev sets are scored, the
best model by the handout's overall score is kept, and at the end its dev and test predictions
are written in the handout's format. Each method owns its flags (`--help` lists them by paper):
PALs, pair heads and MNR, loss scaling, head pretraining, SMART, R3F/R4F, PCGrad/GradVac,
Gradient Compromise, and stages that start from an earlier run.

Commands (GPU, CPU quick start, a paper's recipe, resume after Ctrl-C): README "Quick start", docs/training.md.
"""

import math
import os
import time

import torch
from torch import nn
from tqdm import tqdm

from minbert.adamw import AdamW, linear_warmup_decay, param_groups
from minbert.core import flags, interrupt, progress
from minbert.methods import gradient_compromise, gradvac, head_pretraining, loss_scaling, mnr, pals, pcgrad, r3f, smart
from minbert.run import checkpoint, distributed, run_dir, stages
from minbert.tasks import data, length_buckets, multitask, sampling
from minbert.bert.compiled import compile_blocks
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.core.device import autocast
from minbert.core.errors import DIVERGED, MAX_BAD_STEPS, UserError, cli
from minbert.core.export import MODEL_DIR, OUTPUTS, export, save_outputs
from minbert.core.report import markdown_table, plot_panels
from minbert.tasks.multitask import CROSS_HEADS, TASKS, predictions, run_heads, task_loss, task_scores
from minbert.tasks.sampling import to_device
from minbert.tasks.scoring import eval_batch
from minbert.tools import trained_run

METHODS = (multitask, pals, stages, sampling, loss_scaling, mnr, head_pretraining, smart, r3f, pcgrad, gradvac,
           gradient_compromise)   # each adds its flag group (add_args) and its rules (check_args)


def parser():
    p = flags.ArgumentParser(description=__doc__)
    g = p.add_argument_group("model and optimisation")
    g.add_argument("--model", default="bert-base-uncased",
                   help="hub name, local model folder (e.g. a run's model/), or 'minilm-l6' (offline, from PyPI)")
    g.add_argument("--epochs", type=flags.at_least(1), default=10)
    g.add_argument("--lr", type=flags.positive, default=None,
                   help="default 1e-3 for --option pretrain, 1e-5 for finetune (bert-base); MiniLM: 1e-4 with "
                        "--head_lr 1e-3 (the README's quick start)")
    g.add_argument("--head_lr", type=flags.positive, default=None,
                   help="lr of the new parameters (heads, PALs); default --lr. Fresh heads often want ~10x")
    g.add_argument("--batch_size", type=flags.at_least(1), default=8, help="the handout's 8 is slow; 32 suits a GPU")
    g.add_argument("--grad_accum", type=flags.at_least(1), default=1, help="batches per optimizer step")
    g.add_argument("--weight_decay", type=flags.at_least(0.0, float), default=0.01,
                   help="AdamW decoupled decay, not applied to biases/LayerNorm")
    g.add_argument("--warmup", type=flags.between(0.0, 1.0), default=0.1,
                   help="fraction of all steps with linearly rising lr, then linear decay to 0")
    g.add_argument("--hidden_dropout_prob", type=flags.between(0.0, 0.99), default=0.3,
                   help="dropout inside BERT and before the heads (handout: 0.3)")
    g.add_argument("--steps_per_epoch", type=flags.at_least(0), default=0,
                   help="optimizer steps per epoch; 0 = one pass over all training data in expectation")
    g.add_argument("--max_seq_len", type=flags.between(5, 512, int), default=128,
                   help="truncate sequences (pairs: longest first); >= 5 keeps a token of each sentence of a pair")
    g.add_argument("--limit", type=flags.at_least(0), default=0, help="use at most N examples per split (0 = all)")
    g.add_argument("--use_gpu", action="store_true", help="the handout's flag: same as --device cuda")
    g.add_argument("--select_epoch", choices=("best", "last"), default="best", help="the predictions, outputs.pt and "
                   "model/ come from: best = the best dev overall (the handout's; optimistic dev scores, chosen on the "
                   "set they score), last = the final epoch, fixed in advance (a study's dev scores stay unbiased)")
    data.add_args(p)
    run_dir.add_run_args(p, out_dir="runs/multitask", seed=11711)   # machine, run folder, resume, progress
    for method in METHODS:
        method.add_args(p)
    return p


def parse_args(argv=None):
    p = parser()
    args = p.parse(argv, checkpoint, data, *METHODS)   # --dry_run prints every flag, its value and source, and exits
    if args.use_gpu and not args.device.startswith(("auto", "cuda")):
        p.error(f"--use_gpu means --device cuda, but --device {args.device} was given")
    args.device = "cuda" if args.use_gpu else args.device
    stages.resolve(args)       # --pals_after / --init_from set the flags they imply
    data.resolve_paths(args)   # unset file flags from --data_dir
    args.lr = args.lr or (1e-3 if args.option == "pretrain" else 1e-5)
    return args


def main(argv=None):   # the run folder (refuses a used --out_dir; a lean one at the end), Ctrl-C saves and exits
    return run_dir.main(parse_args(argv), "train_multitask.py", experiment)


def experiment(args, stop):
    """Setup, data, model and methods; then train() and finish()."""
    # ------------------------------------------------------------------ setup (every input checked before work)
    flags.check_outputs(args, [f"{t}_{s}" for t in TASKS for s in ("dev", "test")])
    ck, device, fast = run_dir.start(args, "train_multitask.py", f"option {args.option}")   # --resume, seed, device...
    for note in args.data_notes:
        print(f"data: {note}")
    if args.predict_only:   # no training: the run's model/, loaded as `python -m minbert predict` loads it
        return predict_only(args, stop, device) if distributed.is_main() else None

    # ------------------------------------------------------------------ data (tokenized once)
    tokenizer = Tokenizer.from_pretrained(args.model)
    pair_modes = {t: "cross" if getattr(args, f"{t}_head") in CROSS_HEADS else "separate" for t in ("para", "sts")}
    train_data, dev, test = (data.load_split(args, split, tokenizer, pair_modes) for split in ("train", "dev", "test"))
    sizes = [len(train_data[t]) for t in TASKS]
    print("train sizes", dict(zip(TASKS, sizes)), "| dev", {t: len(dev[t]) for t in TASKS})

    # ------------------------------------------------------------------ model, methods, optimizer
    encoder = BertModel.from_pretrained(args.model, hidden_dropout_prob=args.hidden_dropout_prob,
                                        fast_attention=args.fast_attention)
    model = multitask.from_args(args, encoder, pals.from_args(args, encoder.config, TASKS))
    noise = r3f.from_args(args, model)   # R3F/R4F (R4F normalises the heads' last layers here)
    stage = stages.start(args, model)    # --init_from / --pals_after: reuse an earlier run's modules
    model.to(device).train()
    if args.compile:   # in place: state_dict keys unchanged
        compile_blocks(model, list(model.heads.values()))
        length_buckets.use_on(device, *train_data.values(), *dev.values(), *test.values())   # CUDA: few static shapes
    eval_bs = eval_batch(args.batch_size)
    head_pretraining.from_args(args, model, train_data, dev, device)   # --head_pretrain_epochs, before the run
    # steps from the schedule (base_steps), then with --extra_sst_pass one SST-only pass: steps_per_epoch
    base_steps, steps_per_epoch = sampling.steps_per_epoch(args, sizes, len(train_data["sst"]),
                                                           distributed.world_size())
    total_steps = steps_per_epoch * args.epochs
    new_params = nn.ModuleList([model.heads] + ([model.pals] if model.pals is not None else []))   # --head_lr's
    optimizer = AdamW(param_groups(model.encoder, args.weight_decay) + [g | {"lr": args.head_lr or args.lr} for g in
                      param_groups(new_params, args.weight_decay)], lr=args.lr, fused=fast.fused_adamw)
    trainable = [p for p in model.parameters() if p.requires_grad]
    objects = {   # what a checkpoint holds: each one's state_dict
        "model": model, "optimizer": optimizer,
        "scheduler": linear_warmup_decay(optimizer, int(args.warmup * total_steps), total_steps),
        "scaler": torch.amp.GradScaler(device.type, enabled=args.amp == "fp16"),   # fp16 only; else passes through
        "sampler": sampling.TaskSampler(sizes, "annealed" if args.grad_compromise else args.schedule, args.epochs,
                                        args.seed),
        "streams": [distributed.stream(train_data[t], args.batch_size, args.seed + i) for i, t in enumerate(TASKS)],
        "smart": smart.from_args(args, model, total_steps),
        "mnr": mnr.from_args(args, train_data, lambda data, seed: distributed.stream(data, args.batch_size, seed)),
        "surgery": pcgrad.from_args(args, trainable, args.seed) or gradvac.from_args(args, model, trainable, args.seed)}
    loop = checkpoint.restore(ck, objects, fresh_sums())   # the loop's locals: fresh, or where the checkpoint stopped
    del ck   # the checkpoint's tensors are in the model and optimizer now
    history, kept_dev = train(args, stop, loop, objects, noise, gradient_compromise.from_args(args, TASKS, sizes), dev,
                              eval_bs, device, base_steps, steps_per_epoch)
    if distributed.is_main():
        finish(args, stop, model, tokenizer, dev, test, eval_bs, device, stage, history, kept_dev)
    return history


def train(args, stop, loop, objects, noise, compromise, dev, eval_bs, device, base_steps, steps_per_epoch):
    """The epochs: steps, then dev scores, best.pt, last.pt. Returns the records and the kept model's dev outputs."""
    model, optimizer, scheduler, scaler, sampler, streams, adversary, ranking, surgery = objects.values()
    amp = autocast(device, args.amp)   # the --amp context of every forward (a no-op for off), built once
    sync = distributed.Sync(model, device)   # DDP under torchrun (broadcasts rank 0's weights), else nothing
    examples = args.grad_accum * args.batch_size * distributed.world_size()   # a task's in a step, on every rank
    epoch, step, best, history, elapsed_s, sums, seen, window = loop.values()   # the loop's state (experiment())
    started, bad_steps, kept_dev = time.perf_counter() - elapsed_s, 0, None   # bad_steps: non-finite steps in a row
    steps_log, writer = progress.start(args, (epoch - 1) * steps_per_epoch + step)   # steps.jsonl, TensorBoard

    def resume_state():   # last.pt and interrupted.pt
        return checkpoint.state(objects, {"epoch": epoch, "step": step, "best": best, "history": history, "elapsed_s":
                                          time.perf_counter() - started, "sums": sums, "seen": seen, "window": window},
                                args)
    # ------------------------------------------------------------------ training loop
    with stop.saving(os.path.join(args.out_dir, "interrupted.pt"), lambda path: checkpoint.save(path, resume_state())):
        while epoch <= args.epochs:
            sampler.set_epoch(epoch)
            if ranking:
                ranking.set_epoch(epoch)
            mark = time.perf_counter()   # the step's time, evaluation left out
            for step in progress.bar(range(step, steps_per_epoch), f"epoch {epoch}/{args.epochs}", steps_per_epoch,
                                     step, args.log_seconds):   # a bar, or a progress line every --log_seconds
                # 0) Ctrl-C/SIGTERM during the last step (on any rank): stop here; stop.saving writes interrupted.pt
                if distributed.any_rank(stop.signal is not None) if sync.ddp else stop.signal:
                    raise interrupt.Interrupted(stop.signal or "a signal on another rank")
                finite = True
                for micro in range(args.grad_accum):
                    # 1) the task(s): one by --schedule, K (Muppet, surgery), N (Gradient Compromise), or SST
                    tasks = (sampling.step_tasks(args, sampler, compromise, epoch, TASKS) if step < base_steps
                             else ["sst"])   # --extra_sst_pass
                    losses = {}
                    for task in tasks:
                        batch = to_device(streams[TASKS.index(task)].next(), device)
                        with amp:   # 2) forward and task loss
                            u, v = model.features(task, batch)   # (B, C) pooled; v: the second sentence (bi-encoders)
                            out = model.head(task, u, v)
                            loss = task_loss(task, out, batch["labels"])
                            if args.scale_losses:   # 3) each enabled method's term
                                loss = loss_scaling.scaled_task_loss(task, loss)
                            if ranking and v is not None:   # MNR (Benton): on a batch of positive pairs
                                loss = ranking.loss(task, u, v, batch, loss,
                                                    features=lambda b: model.features(task, to_device(b, device)))
                            if adversary:   # SMART's smoothness term
                                loss = loss + adversary.loss(task, batch, out)
                            if noise:       # R3F/R4F's noise term
                                loss = loss + noise.loss(task, batch, out)
                        if math.isfinite(value := loss.item()):   # the means count finite losses only (a NaN sticks)
                            for s in (sums, window):
                                s[task] = [s[task][0] + value, s[task][1] + 1]
                        else:   # never written into the weights: 6) skips the step
                            finite = False
                            tqdm.write(f"non-finite {task} loss at epoch {epoch} step {step} (ids {batch['ids'][:3]})")
                        losses[task] = losses.get(task, 0.0) + loss
                    if compromise:   # per-task sums divided by S_data^β, β: 0.2 -> 1.0 over the epochs
                        losses = compromise.scale(losses, epoch)
                    if surgery:   # 4) backward (fp16: of the scaled-up loss): per task for surgery, else summed
                        with sync.no_sync():
                            surgery.accumulate([losses[t] / args.grad_accum if t in losses else None for t in TASKS],
                                               scaler)
                    else:
                        loss = sum(losses.values()) / args.grad_accum
                        if sync.ddp:   # torchrun: the gradients are averaged across ranks here, in this backward
                            loss = sync.before_backward(loss, last=micro == args.grad_accum - 1)
                        scaler.scale(loss).backward()
                if surgery:   # 5) surgery: combine the per-task gradients (PCGrad, GradVac, Gradient Compromise)
                    sync.task_grads(surgery)   # average the K per-task gradients across ranks
                    surgery.apply()
                # 6) the update, skipped on all ranks if a loss was not finite on any (fp16: or gradients overflowed)
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
                if adversary:    # 7) SMART's teacher follows the student
                    adversary.update_teacher()
                # 8) the log: this epoch's training time and examples; every --log_every steps a line and a record
                now, done = time.perf_counter(), (epoch - 1) * steps_per_epoch + step + 1   # done: the run's steps
                seen, mark = [seen[0] + now - mark, seen[1] + len(tasks) * examples], now
                if done % args.log_every == 0 and distributed.is_main():
                    progress.write(progress.record(done, epoch, scheduler.get_last_lr(), window, seen, norm,
                                                   now - started), steps_log, writer)   # a line, steps.jsonl, TB
                    window = fresh_sums()
                scheduler.step()   # 9) the next step's learning rate; after a skipped update too (resumes see the same)
            step = steps_per_epoch

            # ---------------------------------------------------------- dev evaluation, metrics, best.pt, last.pt
            with stop.abortable():   # changes no training state: a signal abandons it, resume redoes it
                dev_out = distributed.on_main(lambda: run_heads(model, dev, eval_bs, device, args.amp))
            scores = task_scores(dev_out, dev)
            model.train()
            history.append({"epoch": epoch, **{k: round(v, 4) for k, v in scores.items()},
                            **progress.epoch_record(sums, seen, time.perf_counter() - started)})   # losses, ex/s, time
            progress.epoch_end(args.out_dir, history, writer, epoch * steps_per_epoch)   # metrics.jsonl, a line
            kept_dev = dev_out if scores["overall"] > best or args.select_epoch == "last" else kept_dev   # its model's
            if scores["overall"] > best:   # best.pt: this model's weights and scores
                best = scores["overall"]
                checkpoint.save_weights(os.path.join(args.out_dir, "best.pt"), model, args, scores=scores)
            epoch, step, sums, seen, window = epoch + 1, 0, fresh_sums(), [0.0, 0], fresh_sums()
            checkpoint.save_last(args.out_dir, resume_state())   # the next epoch from step 0
    return history, kept_dev


def fresh_sums() -> dict:
    """{task: [loss sum, count]}, the epoch's or since the last record, before the first loss."""
    return {t: [0.0, 0] for t in TASKS}


def finish(args, stop, model, tokenizer, dev, test, eval_bs, device, stage, history, kept_dev):
    """The kept model's (--select_epoch) six prediction files, raw outputs (for ensembles), model folder, table,
    plot. `kept_dev`: that model's dev outputs from its evaluation in this session (None: scored again here)."""
    kept = os.path.join(args.out_dir, f"{args.select_epoch}.pt")   # best.pt, or last.pt: the model as it is now
    if args.select_epoch == "best":
        model.load_state_dict(checkpoint.load(kept)["model"])
    best, folder = os.path.join(args.out_dir, "best.pt"), os.path.join(args.out_dir, MODEL_DIR)
    checkpoint.own_weights(best)   # a resumed finished run: best.pt's weights back before model/ is rewritten
    # the model as a complete folder first: --predict_only reads it, should writing the predictions fail
    export(folder, model.encoder, tokenizer, {"heads": model.heads, "pals": model.pals},
           stage | {"args": vars(args), "best_dev": history and max(history, key=lambda r: r["overall"])},
           "train_multitask.py", trained_run.model_args("train_multitask.py", args, model.encoder.config.hidden_size))
    checkpoint.share_weights(best, folder)   # one copy on disk: best.pt names model/ when it holds the same weights
    print(f"\ntraining done; the {args.select_epoch} model ({kept}) predicts the dev and test sets", flush=True)
    outputs = write_all_predictions(args, stop, model, dev, test, eval_bs, device, args.out_dir, kept_dev)
    save_outputs(os.path.join(args.out_dir, OUTPUTS), outputs, dev)   # raw logits/scores for minbert.tools.ensemble
    columns = ["epoch", "sst_acc", "para_acc", "sts_pearson", "overall", "train_examples_per_s", "elapsed_s"]
    print("\n" + markdown_table(history, columns))
    print(f"best dev overall {max(r['overall'] for r in history):.4f}")
    plot_panels(os.path.join(args.out_dir, "curves.png"), [r["epoch"] for r in history], {
        "training loss": {t: [r[f"loss_{t}"] for r in history] for t in TASKS},
        "dev scores": {k: [r[k] for r in history] for k in ("sst_acc", "para_acc", "sts_pearson", "overall")}})
    if args.model == "minilm-l6" or args.data_notes:
        print("\nThis was a CPU-sized run (MiniLM and/or the Quora sample). The real thing, on a GPU with bert-base "
              "and the full data:\n  python -m minbert download cs224n && python train_multitask.py --option "
              "finetune --batch_size 32 --lr 2e-5 --epochs 5")


def predict_only(args, stop, device) -> None:
    """--predict_only: the model/ of the run in --resume, loaded as `python -m minbert predict` loads it, predicts
    this command's dev and test files, tokenized as that run was (its tokenizer, --max_seq_len and pair heads)."""
    run = trained_run.load_run(args.resume, str(device), args.amp, script="train_multitask.py")
    args.max_seq_len = run.max_seq_len
    pair_modes = {t: "separate" if run.model.bi_encoder(t) else "cross" for t in ("para", "sts")}
    dev, test = (data.load_split(args, split, run.tokenizer, pair_modes) for split in ("dev", "test"))
    write_all_predictions(args, stop, run.model, dev, test, eval_batch(args.batch_size), device, args.resume)


def write_all_predictions(args, stop, model, dev, test, eval_bs, device, source, dev_outputs=None):
    """The handout's six prediction files from `model`; returns the raw outputs {split: run_heads(...)}, the dev
    split's `dev_outputs` where given (the model's own, from its evaluation). The model is safe in the run folder
    `source` whatever happens here."""
    outputs = {}
    try:
        with interrupt.model_kept(source, "writing predictions", "writes them"), stop.abortable():
            for split, splits in (("dev", dev), ("test", test)):
                outputs[split] = (dev_outputs if split == "dev" and dev_outputs is not None else
                                  run_heads(model, splits, eval_bs, device, args.amp, desc=f"predict {split}"))
                for task, (ids, _, out) in outputs[split].items():
                    path = getattr(args, f"{task}_{split}_out")
                    data.write_predictions(path, data.prediction_headers(args)[task], ids, predictions(task, out))
                    print(f"wrote {path}")
    except OSError as e:
        raise UserError(f"could not write the predictions ({e}). Nothing is lost: the model is in {source}; fix the "
                        f"path and run the same command plus --predict_only --resume {source}") from None
    return outputs


if __name__ == "__main__":
    cli(main)
