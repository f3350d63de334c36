"""SimCSE: contrastive learning of sentence embeddings, as a stage that writes an encoder folder.

Gao, Yao & Chen 2021, "SimCSE: Simple Contrastive Learning of Sentence Embeddings",
arXiv:2104.08821. Used before multitask fine-tuning by Song, Hu & Pan (CS224N report, §3.2).

Unsupervised (§3, Eq. 4): pass the same batch of N sentences through the encoder twice. Dropout
is the only augmentation: the two passes draw independent dropout masks, so h_i and h_i⁺ are
two noisy views of sentence i. With sim = cosine and temperature τ,

    ℓ_i = -log  e^{sim(h_i, h_i⁺)/τ}  /  Σ_{j=1..N} e^{sim(h_i, h_j⁺)/τ}

i.e. cross-entropy over the (N, N) matrix sim(h, h⁺)/τ with target j = i (in-batch negatives).
Supervised (§4, Eq. 5), when an NLI file gives each premise x_i an entailment h_i⁺ and a
contradiction h_i⁻ (hard negative):

    ℓ_i = -log  e^{sim(h_i, h_i⁺)/τ}  /  Σ_j ( e^{sim(h_i, h_j⁺)/τ} + e^{sim(h_i, h_j⁻)/τ} )

i.e. cross-entropy over the (N, 2N) matrix [sim(h, h⁺) | sim(h, h⁻)]/τ with target j = i.

Representation (§3 and Appendix A, the paper's choice): the last layer's [CLS] vector followed
by an MLP (Linear(C, C) + tanh, freshly initialised) during training; at test time [CLS]
WITHOUT the MLP, so only the encoder is exported. `--pooling mean` swaps [CLS] for the mean of
the real tokens (all-MiniLM-L6-v2, the packaged model, was trained with mean pooling).

Defaults are the paper's for unsupervised BERT-base (Appendix A): τ = 0.05, lr 3e-5, batch 64,
max length 32, 1 epoch, no weight decay, linear decay of lr to 0 without warmup (HF Trainer's
default). Supervised SimCSE used batch 512, lr 5e-5, 3 epochs: pass them as flags.

Inputs: `--data cs224n` takes every distinct sentence of the CS224N training files under
--data_dir (SST, Quora, STS; offline), `--data FILE` one sentence per line (wiki1m-style corpora
as the Song/Hu/Pan report used). `--nli FILE` (tab- or comma-separated, with columns sent0,
sent1, hard_neg, SimCSE's nli_for_simcse.csv layout) switches to supervised SimCSE.

Reported before and after training (minbert/embedding_eval.py): STS dev Pearson r and Spearman ρ
of cosine similarities with [CLS] and with mean pooling, alignment and uniformity (Wang & Isola
2020). Written: OUT_DIR/model/ (a complete folder: --model of either script loads it),
OUT_DIR/metrics.json.

Variant choices and what is left out: one forward pass per view (the reference code
concatenates the two copies into one batch of 2N, the same distribution of masks); the model is
the one at the end of training (the paper keeps the best of evaluations every 250 steps on STS-B
dev, which is the CS224N STS dev set here, so selecting on it would leak into later stages).
Left out: the MLM auxiliary loss, the Song/Hu/Pan report's Eq. 1 variant (its denominator also
holds same-view terms sim(h_i, h_j), including the constant j = i term), multi-GPU gathering.
"""

import csv
import json
import math
import os
import time

import torch
import torch.nn.functional as F
from torch import nn
from tqdm import tqdm

from .adamw import AdamW, linear_warmup_decay
from .data import CS224N_FILES, DEFAULT_DATA_DIR, read_quora, read_sst, read_sts
from .device import autocast, pick_device, seed_everything
from .embedding_eval import POOLINGS, pool, sts_report
from . import flags
from .errors import UserError, cli
from .export import MODEL_DIR, export, write_json
from .model import BertModel
from .tokenizer import Tokenizer

TEMPERATURE = 0.05


def simcse_loss(h: torch.Tensor, h_pos: torch.Tensor, h_neg: torch.Tensor | None = None,
                temperature: float = TEMPERATURE) -> torch.Tensor:
    """Mean ℓ_i over the batch. h, h_pos, h_neg: (N, C) views of sentence i, of its positive
    (the second dropout view, or the entailment), of its hard negative (supervised only)."""
    # 1) cosine similarity of every anchor with every candidate: normalise, then dot products
    h, h_pos = F.normalize(h.float(), dim=-1), F.normalize(h_pos.float(), dim=-1)
    logits = h @ h_pos.T                                                    # (N, C) @ (C, N) -> (N, N)
    if h_neg is not None:
        # 2) supervised: the hard negatives of every sentence are extra columns
        logits = torch.cat([logits, h @ F.normalize(h_neg.float(), dim=-1).T], dim=1)   # (N, 2N)
    # 3) -log softmax at the diagonal: the positive of anchor i is column i
    target = torch.arange(h.shape[0], device=h.device)
    return F.cross_entropy(logits / temperature, target)


class SimCSE(nn.Module):
    """The encoder with SimCSE's training-time head: pooled [CLS] (or mean) -> Linear + tanh."""

    def __init__(self, encoder: BertModel, pooling: str = "cls"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"minbert.simcse.SimCSE: pooling must be one of {POOLINGS}, got {pooling!r}")
        self.encoder, self.pooling = encoder, pooling
        C = encoder.config.hidden_size
        self.mlp = nn.Sequential(nn.Linear(C, C), nn.Tanh())   # training only (§3), never exported
        nn.init.normal_(self.mlp[0].weight, std=encoder.config.initializer_range)
        nn.init.zeros_(self.mlp[0].bias)

    def forward(self, batch: dict) -> torch.Tensor:
        """(B, T) token ids -> (B, C) training representation MLP(pool(h))."""
        h = self.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["last_hidden_state"]
        return self.mlp(pool(h, batch["attention_mask"], self.pooling))

    def loss(self, batch: dict, positive: dict | None = None, negative: dict | None = None) -> torch.Tensor:
        """Unsupervised when `positive` is None: the same batch twice, two dropout masks."""
        h = self(batch)                                                     # (N, C)
        h_pos = self(batch if positive is None else positive)               # (N, C)
        h_neg = None if negative is None else self(negative)                # (N, C)
        return simcse_loss(h, h_pos, h_neg)


# ---------------------------------------------------------------------- inputs


def read_sentences(data: str, data_dir: str, para_train: str | None = None) -> list[str]:
    """Distinct sentences, in first-seen order: the CS224N training files, or a text file."""
    if data == "cs224n":
        d = {k: os.path.join(data_dir, v) for k, v in CS224N_FILES.items()}
        examples = read_sst(d["sst_train"]) + read_quora(para_train or d["para_train"]) + read_sts(d["sts_train"])
        texts = [t for e in examples for t in (e.text, e.text2) if t]
    else:
        if not os.path.isfile(data):
            raise UserError(f"--data {data}: no such file; expected 'cs224n' or a text file with one sentence per line")
        with open(data, encoding="utf-8") as f:
            texts = [line.strip() for line in f if line.strip()]
    return list(dict.fromkeys(texts))


def read_nli(path: str) -> list[tuple[str, str, str]]:
    """(premise, entailment, contradiction) triples from a file with columns sent0, sent1, hard_neg."""
    if not os.path.isfile(path):
        raise UserError(f"--nli {path}: no such file")
    with open(path, encoding="utf-8", newline="") as f:
        head = f.readline()
        f.seek(0)
        rows = list(csv.DictReader(f, delimiter="\t" if "\t" in head else ","))
    if not rows or not {"sent0", "sent1", "hard_neg"} <= set(rows[0]):
        raise UserError(f"--nli {path}:1: expected a header with columns sent0, sent1, hard_neg "
                        f"(SimCSE's nli_for_simcse.csv), got {list(rows[0]) if rows else 'an empty file'}")
    return [(r["sent0"], r["sent1"], r["hard_neg"]) for r in rows]


# ---------------------------------------------------------------------- the stage


def parse_args(argv=None):
    p = flags.ArgumentParser(prog="python -m minbert.simcse", description=__doc__)
    p.add_argument("--model", default="bert-base-uncased", help="encoder to start from: hub name, local folder, or 'minilm-l6' (offline)")
    p.add_argument("--data", default="cs224n", help="'cs224n' (the task sentences under --data_dir) or a text file, one sentence per line")
    p.add_argument("--para_train", default=None, help="with --data cs224n: the Quora training file (default DATA_DIR/quora-train.csv; e.g. quora-train-sample.csv)")
    p.add_argument("--nli", default=None, help="supervised SimCSE: a file with columns sent0, sent1, hard_neg (entailment positives, contradiction negatives)")
    p.add_argument("--data_dir", default=DEFAULT_DATA_DIR, help="folder with the CS224N files (train sentences; sts-dev.csv for the report)")
    p.add_argument("--pooling", choices=POOLINGS, default="cls", help="cls: [CLS] + MLP in training, [CLS] at test (paper); mean: for minilm-l6")
    p.add_argument("--temperature", type=float, default=TEMPERATURE, help="τ of the InfoNCE loss (paper: 0.05)")
    p.add_argument("--lr", type=float, default=3e-5, help="paper: 3e-5 unsupervised (bert-base), 5e-5 supervised")
    p.add_argument("--batch_size", type=int, default=64, help="N sentences per step; paper: 64 unsupervised, 512 supervised")
    p.add_argument("--max_seq_len", type=int, default=32, help="truncate to this many tokens (paper: 32)")
    p.add_argument("--epochs", type=int, default=1, help="passes over the sentences (paper: 1 unsupervised, 3 supervised)")
    p.add_argument("--max_steps", type=int, default=0, help="stop after this many steps (0 = all epochs): short CPU budgets")
    p.add_argument("--limit", type=int, default=0, help="use at most N training sentences (and N STS dev pairs): smoke runs")
    p.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, mps")
    p.add_argument("--amp", choices=["off", "bf16", "fp16"], default="off", help="mixed precision of the forward passes; the loss is fp32")
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--out_dir", default="runs/simcse", help="model/ (the encoder for --model of the next stage) and metrics.json")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    seed_everything(args.seed)
    device = pick_device(args.device)
    tokenizer = Tokenizer.from_pretrained(args.model)
    encoder = BertModel.from_pretrained(args.model)
    model = SimCSE(encoder, args.pooling).to(device).train()
    supervised = args.nli is not None
    rows = read_nli(args.nli) if supervised else read_sentences(args.data, args.data_dir, args.para_train)
    rows = rows[: args.limit or None]
    sts_dev = read_sts(os.path.join(args.data_dir, CS224N_FILES["sts_dev"]))[: args.limit or None]
    print(f"SimCSE ({'supervised' if supervised else 'unsupervised'}) from {args.model}: {len(rows)} "
          f"{'triples' if supervised else 'sentences'}, pooling {args.pooling}, τ {args.temperature}, device {device}")

    def report():
        return {p: sts_report(encoder, tokenizer, sts_dev, p, device=device) for p in POOLINGS}

    before = report()
    print("before:", json.dumps(before))

    steps_per_epoch = math.ceil(len(rows) / args.batch_size)
    total = min(args.max_steps or steps_per_epoch * args.epochs, steps_per_epoch * args.epochs)
    optimizer = AdamW(model.parameters(), lr=args.lr, weight_decay=0.0)
    scheduler = linear_warmup_decay(optimizer, 0, total)
    generator = torch.Generator().manual_seed(args.seed)

    def tokens(texts):
        return {k: v.to(device) for k, v in tokenizer(list(texts), max_length=args.max_seq_len).items()}

    step, t0, losses = 0, time.time(), []
    bar = tqdm(total=total, desc="simcse", disable=None)
    while step < total:
        for idx in torch.randperm(len(rows), generator=generator).split(args.batch_size):
            if step >= total:
                break
            chunk = [rows[i] for i in idx.tolist()]
            if len(chunk) < 2:
                continue   # one sentence has no in-batch negative
            with autocast(device, args.amp):
                if supervised:
                    loss = model.loss(*(tokens(col) for col in zip(*chunk)))
                else:
                    loss = model.loss(tokens(chunk))
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.3f}")
    bar.close()

    after = report()
    print("after:", json.dumps(after))
    record = {"stage": "simcse", "supervised": supervised, "model": args.model, "steps": step,
              "train_s": round(time.time() - t0, 1), "final_loss": losses[-1] if losses else None,
              "before": before, "after": after, "args": vars(args)}
    export(os.path.join(args.out_dir, MODEL_DIR), encoder, tokenizer, stage=record)
    write_json(os.path.join(args.out_dir, "metrics.json"), record)
    print(f"wrote {os.path.join(args.out_dir, MODEL_DIR)}: pass it as --model to train_multitask.py or train_mml.py")
    return record


if __name__ == "__main__":
    cli(main)
