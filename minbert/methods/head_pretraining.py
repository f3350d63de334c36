"""Per-task head pretraining: train each task head on the frozen encoder before fine-tuning.

A randomly initialised head sends large, noisy gradients into the pretrained encoder during
the first fine-tuning steps. Training the heads first, one task at a time, on a frozen encoder
(cheap: the encoder runs under no_grad) starts fine-tuning from heads that already fit the
features; the same idea as LP-FT (Kumar et al. 2022, "Fine-Tuning can Distort Pretrained
Features", arXiv:2202.10054), as used in the CS224N seed report 004.

For each task: AdamW on that head only, up to `epochs` passes over its training data, the dev
score after each pass, and the head's best state kept. The encoder's trainability is restored after.

Early stopping: with `patience` = P > 0 a task stops after P passes in a row without a new best
dev score (Pritsky, Somerville & Huynh, CS224N report, §4.4: "individually pretrained for 25
epochs with a learning rate of 1e-3 with a patience of 3"; --head_pretrain_epochs 25
--head_pretrain_patience 3 --head_pretrain_lr 1e-3). "Better" is strictly greater (a tie does
not reset the count). patience = 0 runs all `epochs` passes.
"""

import copy

import torch

from minbert.adamw import AdamW
from minbert.core import flags
from minbert.core.device import autocast
from minbert.tasks.sampling import to_device
from minbert.tasks.multitask import run_heads, task_loss, task_scores


def pretrain_heads(model, train: dict, dev: dict, epochs: int, batch_size: int, lr: float,
                   device, amp: str, seed: int, patience: int = 0) -> dict:
    """Returns {task: best dev score} and leaves each head at its best epoch; `patience` > 0 stops a
    task after that many epochs in a row without a better dev score."""
    was_frozen, pals = model.frozen_encoder, model.pals
    model.frozen_encoder, model.pals = True, None          # encoder under no_grad, no PALs yet
    trainable = [p.requires_grad for p in model.encoder.parameters()]
    model.encoder.requires_grad_(False)
    best = {}
    for task in train:
        head = model.heads[task]
        opt = AdamW(head.parameters(), lr=lr, weight_decay=0.0)
        best_score, best_state, stale = -float("inf"), None, 0
        for epoch in range(epochs):
            model.train()
            g = torch.Generator().manual_seed(seed * 1000 + epoch)
            for batch in train[task].batches(batch_size, shuffle=True, generator=g):
                batch = to_device(batch, device)
                with autocast(device, amp):
                    loss = task_loss(task, model(task, batch), batch["labels"])
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            score = next(iter(task_scores(run_heads(model, {task: dev[task]}, batch_size, device, amp), dev).values()))
            print(f"head pretraining {task} epoch {epoch + 1}/{epochs}: dev {score:.4f}")
            if score > best_score:
                best_score, best_state, stale = score, copy.deepcopy(head.state_dict()), 0
            else:
                stale += 1
            if patience and stale >= patience:
                print(f"head pretraining {task}: no better dev score for {patience} epochs, stopping")
                break
        head.load_state_dict(best_state)
        best[task] = best_score
    for p, t in zip(model.encoder.parameters(), trainable):
        p.requires_grad_(t)
    model.frozen_encoder, model.pals = was_frozen, pals
    model.train()
    return best


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    d = flags.defaults(pretrain_heads)
    g = parser.add_argument_group("head pretraining (Pritsky et al., CS224N report §3.3)")
    g.add_argument("--head_pretrain_epochs", type=flags.at_least(0), default=0,
                   help="first train each head alone on the frozen encoder for N epochs (Pritsky et al.: 25)")
    g.add_argument("--head_pretrain_patience", type=flags.at_least(0), default=d["patience"],
                   help="stop a head after N epochs without a better dev score (Pritsky et al.: 3; 0 = off)")
    g.add_argument("--head_pretrain_lr", type=flags.positive, default=1e-3,
                   help="lr of head pretraining (Pritsky et al.: 1e-3)")


def check_args(args, parser) -> None:
    if args.option == "pretrain" and args.head_pretrain_epochs:
        parser.error("--head_pretrain_epochs trains the heads on the frozen encoder, which is what --option pretrain "
                     "already does")


def from_args(args, model, train: dict, dev: dict, device) -> dict | None:
    """Head pretraining before a fresh run when --head_pretrain_epochs is set (never on --resume: the heads
    in the checkpoint were pretrained already)."""
    if not args.head_pretrain_epochs or args.resume:
        return None
    return pretrain_heads(model, train, dev, args.head_pretrain_epochs, args.batch_size, args.head_pretrain_lr, device,
                          args.amp, args.seed, patience=args.head_pretrain_patience)
