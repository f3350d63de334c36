"""What each multitask method costs and what it buys, against the baseline in the same run.

    python bench/bench_methods.py steps     # ~5 min: train-step time of every method / baseline
    python bench/bench_methods.py recipe    # ~40 min: the CPU recipe at a reduced, equal budget per method

`steps` times one optimizer step (forward, every extra pass the method needs, backward, AdamW)
on a fixed batch, interleaving method and baseline and taking medians:
  - MiniLM shape (B=32, T=64, bf16 autocast): SMART, R3F (one task per step, vs the one-task
    baseline); PCGrad, GradVac (one batch of each of the 3 tasks per step, vs the same 3 batches
    with a plain summed backward); MML heads at m = D with the multiverse loss vs one head;
  - bert-base shape (B=16, T=128, random weights, bf16): PALs vs plain BERT, and PALs on a
    frozen BERT vs full fine-tuning.
`recipe` runs train_multitask.py on the shared CS224N sample data with MiniLM, the same seed
and the same reduced budget for every method (--limit, --epochs below), and tabulates the dev
scores, wall time and training throughput relative to the baseline. Reduced budget means the
scores rank methods at this budget only; they are not the full recipe's scores.
Results go to bench/results/methods.md. Run nothing else heavy meanwhile (2 cores).
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from minbert.adamw import AdamW  # noqa: E402
from minbert.bert.config import BertConfig  # noqa: E402
from minbert.core.device import autocast, resolve_amp  # noqa: E402
from minbert.methods.gradvac import GradVac  # noqa: E402
from minbert.methods.mml import HeadEliminator, MultiverseHeads  # noqa: E402
from minbert.bert.model import BertModel  # noqa: E402
from minbert.tasks.multitask import TASKS, MultitaskBert, task_loss  # noqa: E402
from minbert.methods.pals import PALs  # noqa: E402
from minbert.methods.pcgrad import PCGrad  # noqa: E402
from minbert.methods.r3f import R3F  # noqa: E402
from minbert.methods.smart import SMART  # noqa: E402

CPU = torch.device("cpu")
AMP = resolve_amp("auto", CPU)[0]   # bf16 only where the CPU has it natively (AMX/AVX512-BF16)
RESULTS = os.path.join(os.path.dirname(__file__), "results", "methods.md")
SHARED = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data", "cs224n"))


def batch(B, T, task, seed):
    g = torch.Generator().manual_seed(seed)
    labels = {"sst": torch.randint(0, 5, (B,), generator=g), "para": torch.randint(0, 2, (B,), generator=g).float(),
              "sts": torch.rand(B, generator=g) * 5}[task]
    return {"input_ids": torch.randint(1000, 30000, (B, T), generator=g), "attention_mask": torch.ones(B, T, dtype=torch.long),
            "token_type_ids": (torch.arange(T) >= T // 2).long().expand(B, T), "labels": labels}


def median_times(fns: dict, reps: int) -> dict:
    """Interleave the step functions round by round (drift hits all alike); median seconds each."""
    times = {k: [] for k in fns}
    for r in range(reps + 1):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            if r:  # round 0 warms up
                times[k].append(time.perf_counter() - t)
    return {k: statistics.median(v) for k, v in times.items()}


def step_fn(model, opt, losses_of, extra=None, surgery=None):
    def step():
        with autocast(CPU, AMP):
            losses = losses_of()
        if surgery:
            surgery.accumulate(losses)
            surgery.apply()
        else:
            sum(losses).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if extra:
            extra()
    return step


def mml_rows(enc, bb, shape, reps):
    """MML at m = D heads with L_mv and the moving averages, vs the one-head `bert` baseline."""
    D = enc.config.hidden_size

    def mml_step(m):
        heads = MultiverseHeads(D, 2, m)
        elim = HeadEliminator(heads, every=10**9)   # moving averages only: MeanShift runs every 1000 steps
        o = AdamW(list(enc.parameters()) + list(heads.parameters()), lr=1e-5)

        def step():
            with autocast(CPU, AMP):
                d = enc(bb["input_ids"], bb["attention_mask"], bb["token_type_ids"])["pooler_output"]
                loss, per_head = heads.task_loss(heads(d), bb["labels"].long())
                if m > 1:
                    loss = loss + 0.005 * heads.multiverse_loss()
            loss.backward()
            elim.observe(per_head)
            o.step()
            o.zero_grad(set_to_none=True)
        return step

    t = median_times({"MML heads m=1 (bert)": mml_step(1), f"MML heads m={D} + L_mv": mml_step(D)}, reps)
    return [(shape, k, t[k], t[k] / t["MML heads m=1 (bert)"], "" if "m=1" in k else "target ≤ 1.15×") for k in t]


def bench_steps(reps):
    rows = []
    # --- MiniLM shape: regularisers and gradient surgery
    enc = BertModel.from_pretrained("minilm-l6", hidden_dropout_prob=0.1)
    model = MultitaskBert(enc, pooling="mean").train()
    opt = AdamW(model.parameters(), lr=1e-5)
    b = {t: batch(32, 64, t, i) for i, t in enumerate(TASKS)}
    one = lambda: [task_loss("sst", model("sst", b["sst"]), b["sst"]["labels"])]   # noqa: E731
    smart, r3f = SMART(model, total_steps=1000), R3F(model)

    def with_reg(reg):
        out = model("sst", b["sst"])
        return [task_loss("sst", out, b["sst"]["labels"]) + reg.loss("sst", b["sst"], out)]

    three = lambda: [task_loss(t, model(t, b[t]), b[t]["labels"]) for t in TASKS]   # noqa: E731
    params = [p for p in model.parameters() if p.requires_grad]
    t = median_times({"baseline": step_fn(model, opt, one),
                      "SMART": step_fn(model, opt, lambda: with_reg(smart), extra=smart.update_teacher),
                      "R3F": step_fn(model, opt, lambda: with_reg(r3f))}, reps)
    rows += [("MiniLM B32 T64", k, t[k], t[k] / t["baseline"], "one task per step") for k in t]
    t = median_times({"3 tasks, summed backward": step_fn(model, opt, three),
                      "PCGrad": step_fn(model, opt, three, surgery=PCGrad(params)),
                      "GradVac": step_fn(model, opt, three, surgery=GradVac(params))}, reps)
    rows += [("MiniLM B32 T64", k, t[k], t[k] / t["3 tasks, summed backward"], "3 batches per step; target ≤ 3× backward + 10%") for k in t]

    # --- MML heads at m = D (+ multiverse loss, moving averages) vs one head, same encoder
    rows += mml_rows(enc, b["para"], "MiniLM B32 T64", reps)

    # --- bert-base shape: PALs (random weights; speed does not depend on them)
    torch.manual_seed(0)
    cfg = BertConfig()
    plain = MultitaskBert(BertModel(cfg)).train()
    pal = MultitaskBert(BertModel(cfg), pals=PALs(cfg, TASKS)).train()
    frozen = MultitaskBert(BertModel(cfg), pals=PALs(cfg, TASKS), frozen_encoder=True).train()
    bb = batch(16, 128, "sst", 7)
    fns = {}
    for name, mdl in (("BERT", plain), ("BERT + PALs", pal), ("frozen BERT + PALs", frozen)):
        o = AdamW([p for p in mdl.parameters() if p.requires_grad], lr=1e-5)
        fns[name] = step_fn(mdl, o, lambda mdl=mdl: [task_loss("sst", mdl("sst", bb), bb["labels"])])
    t = median_times(fns, max(2, reps // 2))
    notes = {"BERT + PALs": "target ≤ 1.15×", "frozen BERT + PALs": "target ≤ 0.5× (≥ 2× faster)"}
    rows += [("bert-base B16 T128", k, t[k], t[k] / t["BERT"], notes.get(k, "")) for k in t]
    bb["labels"] = bb["labels"] % 2
    rows += mml_rows(plain.encoder, bb, "bert-base B16 T128", max(2, reps // 2))

    lines = [f"\n## Step time per method ({time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, "
             f"{torch.get_num_threads()} threads, amp {AMP} (auto), median of {reps})", "",
             "| shape | method | s/step | ratio to its baseline | note |", "|---|---|---|---|---|"]
    lines += [f"| {s} | {k} | {v:.3f} | {r:.2f} | {n} |" for s, k, v, r, n in rows]
    return "\n".join(lines) + "\n"


RECIPE_METHODS = {
    "baseline": [],
    "--pals (zero init)": ["--pals", "--pals_init", "zero"],
    "--schedule annealed": ["--schedule", "annealed"],
    "--heterogeneous --scale_losses": ["--heterogeneous", "--scale_losses"],
    "--para_head/--sts_head cosine": ["--para_head", "cosine", "--sts_head", "cosine"],
    "--para_head/--sts_head siamese": ["--para_head", "siamese", "--sts_head", "siamese"],
    "cosine heads + --mnr 0.1": ["--para_head", "cosine", "--sts_head", "cosine", "--mnr", "0.1"],
    "--smart 1": ["--smart", "1"],
    "--r3f 1": ["--r3f", "1"],
    "--surgery pcgrad": ["--surgery", "pcgrad"],
    "--surgery gradvac": ["--surgery", "gradvac"],
    "--grad_compromise 4": ["--grad_compromise", "4"],
}


def bench_recipe(limit, epochs, only):
    import train_multitask
    common = ["--model", "minilm-l6", "--data_dir", SHARED, "--para_train", os.path.join(SHARED, "quora-train-sample.csv"),
              "--para_dev", os.path.join(SHARED, "quora-dev-sample.csv"), "--para_test", "none", "--sst_test", "none",
              "--sts_test", "none", "--amp", "auto", "--batch_size", "32", "--lr", "1e-4", "--hidden_dropout_prob", "0.1",
              "--pooling", "mean", "--limit", str(limit), "--epochs", str(epochs), "--seed", "11711"]
    rows = []
    for name, flags in RECIPE_METHODS.items():
        if only and name not in only:
            continue
        out = f"/tmp/bench_methods/{len(rows)}"
        outs = [f"--{t}_dev_out={out}/{t}-dev.csv" for t in TASKS]
        t0 = time.time()
        hist = train_multitask.main(common + flags + ["--out_dir", out] + outs)
        best = max(hist, key=lambda r: r["overall"])
        rows.append((name, best, time.time() - t0, statistics.mean(r["train_examples_per_s"] for r in hist)))
        print(name, best)
    base_xps = rows[0][3] if rows and rows[0][0] == "baseline" else None
    lines = [f"\n## CPU recipe at an equal reduced budget ({time.strftime('%Y-%m-%d %H:%M')}): MiniLM, "
             f"--limit {limit} examples per split, {epochs} epochs, seed 11711, --amp auto ({AMP}), batch 32, lr 1e-4, mean pooling", "",
             "| method | SST acc | Quora acc | STS r | overall | wall s | train ex/s | ex/s vs baseline |", "|---|---|---|---|---|---|---|---|"]
    for name, best, wall, xps in rows:
        ratio = f"{xps / base_xps:.2f}" if base_xps else "-"
        lines.append(f"| {name} | {best['sst_acc']:.3f} | {best['para_acc']:.3f} | {best['sts_pearson']:.3f} | "
                     f"{best['overall']:.4f} | {wall:.0f} | {xps:.0f} | {ratio} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("part", choices=["steps", "recipe"])
    p.add_argument("--reps", type=int, default=5, help="timed steps per method (steps)")
    p.add_argument("--limit", type=int, default=2000, help="examples per split (recipe)")
    p.add_argument("--epochs", type=int, default=2, help="epochs per method (recipe)")
    p.add_argument("--only", default="", help="comma-separated method names of the recipe table to run")
    a = p.parse_args()
    text = bench_steps(a.reps) if a.part == "steps" else bench_recipe(a.limit, a.epochs, [s for s in a.only.split(",") if s])
    print(text)
    os.makedirs(os.path.dirname(RESULTS), exist_ok=True)
    with open(RESULTS, "a") as f:
        f.write(text)


if __name__ == "__main__":
    main()
