"""python -m minbert simcse: train an encoder with SimCSE and write it as a folder for the next stage.

The method (the loss, the training-time MLP, which MLP is kept at test time) is minbert/methods/simcse.py
(Gao, Yao & Chen 2021, arXiv:2104.08821); this is the command around it: readers, the loop, the export.
Defaults are the paper's for unsupervised BERT-base (Appendix A): τ = 0.05, lr 3e-5, batch 64, max length 32,
1 epoch, no weight decay, lr decayed linearly to 0 without warmup (supervised: batch 512, lr 5e-5, 3 epochs, as
flags). `--weight_decay` and `--attention_dropout` are flags because Song, Hu & Pan varied both (their §4.4).

Inputs: `--data cs224n` takes every distinct sentence of the CS224N training files under --data_dir (offline),
`--data FILE` one sentence per line (wiki1m-style corpora). `--nli FILE` (columns sent0, sent1, hard_neg:
SimCSE's nli_for_simcse.csv) switches to supervised SimCSE.

Reported before and after training (minbert/tasks/embedding_eval.py): STS dev Pearson r and Spearman ρ of
cosine similarities with [CLS] and with mean pooling, alignment and uniformity (Wang & Isola 2020).
Written: OUT_DIR/model/ (--model of either script loads it) and OUT_DIR/metrics.json. The model written is the
one at the end of training: the paper keeps the best on STS-B dev, which is the CS224N STS dev set here, so
selecting on it would leak into later stages.
"""

import csv
import json
import math
import os
import sys
import time

import torch
from tqdm import tqdm

from minbert.adamw import AdamW, linear_warmup_decay, param_groups
from minbert.core import flags
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.core.device import add_device_args, autocast, pick_device, resolve_amp, seed_everything, set_threads
from minbert.core.errors import UserError
from minbert.core.export import MODEL_DIR, export, write_json
from minbert.methods.simcse import TEMPERATURE, SimCSE, keeps_mlp
from minbert.tasks.data import CS224N_FILES, DEFAULT_DATA_DIR, default_paths, read_quora, read_sst, read_sts
from minbert.tasks.embedding_eval import POOLINGS, sts_report
from minbert.run.run_dir import refuse_to_replace


# ---------------------------------------------------------------------- inputs


def read_sentences(data: str, data_dir: str, para_train: str | None = None) -> list[str]:
    """Distinct sentences, in first-seen order: the CS224N training files, or a text file."""
    if data == "cs224n":
        d, notes = default_paths(data_dir)   # the shipped Quora sample when the full files are absent
        for note in notes:
            print(f"data: {note}")
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


def add_args(p) -> None:
    """SimCSE's flags (Gao et al. 2021; defaults: App. A, unsupervised BERT-base)."""
    g = p.add_argument_group("SimCSE (Gao, Yao & Chen 2021, arXiv:2104.08821)")
    g.add_argument("--model", default="bert-base-uncased",
                   help="encoder to start from: hub name, local folder, or 'minilm-l6' (offline)")
    g.add_argument("--data", default="cs224n",
                   help="'cs224n' (the task sentences under --data_dir) or a text file, one sentence per line")
    g.add_argument("--para_train", default=None,
                   help="with --data cs224n: the Quora training file (default DATA_DIR/quora-train.csv; e.g. "
                        "quora-train-sample.csv)")
    g.add_argument("--nli", default=None,
                   help="supervised SimCSE: a file with columns sent0, sent1, hard_neg (entailment positives, "
                        "contradiction negatives)")
    g.add_argument("--data_dir", default=DEFAULT_DATA_DIR,
                   help="folder with the CS224N files (train sentences; sts-dev.csv for the report)")
    g.add_argument("--pooling", choices=POOLINGS, default="cls",
                   help="cls: [CLS] + MLP in training (paper); mean: for minilm-l6")
    g.add_argument("--test_mlp", choices=["auto", "keep", "drop"], default="auto",
                   help="MLP at test time, exported as the encoder's pooler: auto = the paper's (App. A): keep for "
                        "supervised, drop for unsupervised")
    g.add_argument("--temperature", type=flags.positive, default=TEMPERATURE,
                   help="τ of the InfoNCE loss (paper: 0.05)")
    g.add_argument("--lr", type=flags.positive, default=3e-5,
                   help="paper: 3e-5 unsupervised (bert-base), 5e-5 supervised")
    g.add_argument("--weight_decay", type=flags.at_least(0.0, float), default=0.0,
                   help="AdamW decoupled decay (paper: 0; Song/Hu/Pan varied it)")
    g.add_argument("--attention_dropout", type=flags.between(0.0, 0.99), default=None,
                   help="BERT's attention-probability dropout during SimCSE (default: the model's config, 0.1 for "
                        "bert-base; Song/Hu/Pan varied it)")
    g.add_argument("--hidden_dropout", type=flags.between(0.0, 0.99), default=None,
                   help="BERT's hidden dropout, SimCSE's augmentation (default: the model's config, "
                        "0.1 = the paper's p)")
    g.add_argument("--batch_size", type=flags.at_least(2), default=64,
                   help="N sentences per step; paper: 64 unsupervised, 512 supervised")
    g.add_argument("--max_seq_len", type=flags.between(5, 512, int), default=32,
                   help="truncate to this many tokens (paper: 32)")
    g.add_argument("--epochs", type=flags.at_least(1), default=1,
                   help="passes over the sentences (paper: 1 unsupervised, 3 supervised)")
    g.add_argument("--max_steps", type=flags.at_least(0), default=0,
                   help="stop after this many steps (0 = all epochs): short CPU budgets")
    g.add_argument("--limit", type=flags.at_least(0), default=0,
                   help="use at most N training sentences (and N STS dev pairs): smoke runs")
    add_device_args(g)
    g.add_argument("--seed", type=int, default=42)
    g.add_argument("--out_dir", default="runs/simcse",
                   help="model/ (the encoder for --model of the next stage) and metrics.json")
    g.add_argument("--overwrite", action="store_true",
                   help="replace the model/ and metrics.json already in --out_dir (default: refuse)")


def check_args(args, p) -> None:
    if args.test_mlp == "keep" and args.pooling != "cls":
        p.error("--test_mlp keep needs --pooling cls: the kept MLP becomes the encoder's pooler, which reads [CLS]")


def parser():
    p = flags.ArgumentParser(prog="python -m minbert simcse", description=__doc__)
    add_args(p)
    return p


def parse_args(argv=None):
    return parser().parse(argv, sys.modules[__name__])   # then check_args


def main(argv=None):
    args = parse_args(argv)
    if not args.overwrite:   # before any work: another stage's encoder (or a run's model/) is never replaced unasked
        refuse_to_replace([os.path.join(args.out_dir, n) for n in (MODEL_DIR, "metrics.json")])
    seed_everything(args.seed)
    device = pick_device(args.device)
    args.amp, amp_reason = resolve_amp(args.amp, device)
    set_threads(args.threads, device)   # --threads, OMP_NUM_THREADS, or the cores free now; one line
    tokenizer = Tokenizer.from_pretrained(args.model)
    overrides = {k: v for k, v in (("attention_probs_dropout_prob", args.attention_dropout),
                                   ("hidden_dropout_prob", args.hidden_dropout)) if v is not None}
    encoder = BertModel.from_pretrained(args.model, **overrides)
    # this stage's dropout is SimCSE's augmentation, not the next stage's: the export keeps the model's own values
    original = BertConfig.from_json(encoder.source / "config.json")
    exported_config = {k: getattr(original, k) for k in overrides}
    model = SimCSE(encoder, args.pooling, args.temperature).to(device).train()
    supervised = args.nli is not None
    keep_mlp = keeps_mlp(args.test_mlp, supervised, args.pooling)
    rows = read_nli(args.nli) if supervised else read_sentences(args.data, args.data_dir, args.para_train)
    rows = rows[: args.limit or None]
    sts_dev = read_sts(os.path.join(args.data_dir, CS224N_FILES["sts_dev"]))[: args.limit or None]
    print(f"SimCSE ({'supervised' if supervised else 'unsupervised'}) from {args.model}: {len(rows)} "
          f"{'triples' if supervised else 'sentences'}, pooling {args.pooling}, τ {args.temperature}, device {device}, "
          f"amp {args.amp} ({amp_reason}), "
          f"MLP at test time: {'kept (as the pooler)' if keep_mlp else 'dropped'}")

    def report():
        return {p: sts_report(encoder, tokenizer, sts_dev, p, device=device) for p in POOLINGS}

    before = report()
    print("before:", json.dumps(before))

    steps_per_epoch = math.ceil(len(rows) / args.batch_size)
    total = min(args.max_steps or steps_per_epoch * args.epochs, steps_per_epoch * args.epochs)
    optimizer = AdamW(param_groups(model, args.weight_decay), lr=args.lr)   # biases/LayerNorm never decayed
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
            with autocast(device, args.amp):   # supervised: the (sent0, sent1, hard_neg) columns
                loss = model.loss(*(map(tokens, zip(*chunk)) if supervised else [tokens(chunk)]))
            loss.backward()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            step += 1
            bar.update(1)
            bar.set_postfix(loss=f"{sum(losses[-50:]) / len(losses[-50:]):.3f}")
    bar.close()
    if keep_mlp:   # supervised SimCSE (App. A): the MLP stays in the test-time encoder, as its pooler
        model.keep_mlp()

    after = report()
    print("after:", json.dumps(after))
    record = {"stage": "simcse", "supervised": supervised, "model": args.model, "steps": step,
              "train_s": round(time.time() - t0, 1), "final_loss": losses[-1] if losses else None,
              "test_mlp": "kept as the pooler" if keep_mlp else "dropped",
              "before": before, "after": after, "args": vars(args)}
    for key, value in exported_config.items():   # the config of the model started from, dropout included
        setattr(encoder.config, key, value)
    export(os.path.join(args.out_dir, MODEL_DIR), encoder, tokenizer, stage=record)
    write_json(os.path.join(args.out_dir, "metrics.json"), record)
    print(f"wrote {os.path.join(args.out_dir, MODEL_DIR)}: pass it as --model to train_multitask.py or train_mml.py")
    return record

