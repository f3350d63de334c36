"""The CPU recipe of train_multitask.py, timed: MiniLM on the CS224N data the repository ships (data/).

    python bench/bench_multitask.py                 # ~30 min on 2 cores; nothing else heavy meanwhile
    python bench/bench_multitask.py --epochs 1 --limit 2000   # a few minutes, for a quick look
    python bench/bench_multitask.py --amp off --fast_paths off  # fp32, readable paths only

It runs train_multitask.main with the recipe's flags (printed; --amp and --fast_paths pass
through), then measures the peers that matter for throughput in the same process, interleaved
batch by batch on the *same* batches the recipe trains on, at the recipe's precision: minbert's
bare encoder train step (forward + backward + AdamW, no data pipeline, no bookkeeping, with the
run's fast paths) and the HF peer, transformers.BertModel loaded from the same minilm-l6 weights
(eager attention) with the same loss and the same (fused when on) AdamW. Recipe ex/s / bare ex/s
shows what the data pipeline, heads and logging cost; HF ex/s / bare ex/s what the model code
costs. The accuracy
peer (a plain HF-transformers multitask trainer given the same model, data and 30 minutes on
this machine: about 0.47 / 0.835 / 0.855 dev SST acc / Quora acc / STS r) is a quoted figure, not
re-run here (it would double the benchmark's time), so it is not a measurement of this repository.
Results are appended to bench/results/multitask.md.
"""

import argparse
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import train_multitask  # noqa: E402
from minbert.adamw import AdamW  # noqa: E402
from minbert.run import fast_paths  # noqa: E402
from minbert.core.device import autocast, cpu_capability, cpu_name, resolve_amp  # noqa: E402
from minbert.bert.model import BertModel  # noqa: E402

DATA = os.path.join(os.path.dirname(__file__), "..", "data")   # the shipped files (Quora: its sample)


def recipe_args(a):
    d = os.path.normpath(a.data_dir)
    return ["--model", "minilm-l6", "--data_dir", d,
            "--para_train", os.path.join(d, "quora-train-sample.csv"),
            "--para_dev", os.path.join(d, "quora-dev-sample.csv"), "--para_test", "none",
            "--amp", a.amp, "--fast_paths", a.fast_paths,
            "--batch_size", "32", "--lr", str(a.lr), "--head_lr", str(a.head_lr), "--epochs", str(a.epochs),
            "--hidden_dropout_prob", "0.1", "--pooling", "mean", "--out_dir", a.out_dir, "--limit", str(a.limit),
            *[f"--{t}_{s}_out={a.out_dir}/predictions/{t}-{s}-output.csv" for t in ("sst", "para", "sts") for s in ("dev", "test")]]


def peers_examples_per_s(args, fast, n_batches=40):
    """Train steps of minbert's and HF's bare encoder + mean-loss on batches drawn exactly like the
    recipe's, interleaved (the order alternates); -> {name: (ex/s, median step s)}."""
    import transformers
    from minbert.core import hub
    from minbert.bert.tokenizer import Tokenizer
    from minbert.tasks.data import read_quora, read_sst, read_sts
    from minbert.tasks.sampling import TaskData
    tok = Tokenizer.from_pretrained("minilm-l6")
    d = os.path.normpath(args.data_dir)
    sets = [read_sst(os.path.join(d, "ids-sst-train.csv")), read_quora(os.path.join(d, "quora-train-sample.csv")),
            read_sts(os.path.join(d, "sts-train.csv"))]
    batches = []
    for i, ex in enumerate(sets):
        it = TaskData(ex, tok, 128).batches(32, shuffle=True, generator=torch.Generator().manual_seed(i))
        batches += [next(it) for _ in range(n_batches // 3 + 1)]
    amp = resolve_amp(args.amp, torch.device("cpu"))[0]   # the recipe's precision
    transformers.logging.set_verbosity_error()
    models = {"minbert": BertModel.from_pretrained("minilm-l6", hidden_dropout_prob=0.1),
              "hf": transformers.BertModel.from_pretrained(str(hub.resolve("minilm-l6")), attn_implementation="eager",
                                                           dtype=torch.float32).train()}
    opts = {k: AdamW(m.parameters(), lr=1e-5, fused=fast.fused_adamw) for k, m in models.items()}
    times, sizes = {k: [] for k in models}, []
    for i, b in enumerate(batches):
        for name in (list(models) if i % 2 else list(models)[::-1]):
            t = time.perf_counter()
            with autocast(torch.device("cpu"), amp):
                out = models[name](input_ids=b["input_ids"], attention_mask=b["attention_mask"],
                                   token_type_ids=b["token_type_ids"])["last_hidden_state"]
            out.float().mean().backward()
            opts[name].step()
            opts[name].zero_grad(set_to_none=True)
            times[name].append(time.perf_counter() - t)
        sizes.append(len(b["ids"]))
    # the first 3 steps warm up allocator and kernels; they are not counted
    return {k: (sum(sizes[3:]) / sum(ts[3:]), statistics.median(ts[3:])) for k, ts in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data_dir", default=DATA)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--lr", type=float, default=1e-4)
    p.add_argument("--head_lr", type=float, default=1e-3)
    p.add_argument("--limit", type=int, default=0)
    p.add_argument("--out_dir", default="runs/cpu_recipe")
    p.add_argument("--amp", default="auto", choices=["auto", "off"], help="auto: bf16 on native-bf16 CPUs; off: fp32")
    fast_paths.add_args(p)
    a = p.parse_args()
    fast = fast_paths.from_args(a, torch.device("cpu"))   # the recipe applies the same; the peers need it here
    argv = recipe_args(a)
    print("python train_multitask.py " + " ".join(argv))
    t0 = time.time()
    history = train_multitask.main(argv)
    wall = time.time() - t0
    last = history[-1]
    best = max(history, key=lambda r: r["overall"])
    recipe_xps = statistics.mean(r["train_examples_per_s"] for r in history)
    peers = peers_examples_per_s(a, fast)
    (bare_xps, bare_step), (hf_xps, hf_step) = peers["minbert"], peers["hf"]
    amp = resolve_amp(a.amp, torch.device("cpu"))[0]
    lines = [
        f"\n## CPU recipe, {time.strftime('%Y-%m-%d %H:%M')}, torch {torch.__version__}, {torch.get_num_threads()} threads",
        "", f"CPU: {cpu_name()} ({cpu_capability()}); amp {amp}; fast paths: {fast}; "
            f"load average at the end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        "", "`python train_multitask.py " + " ".join(argv) + "`", "",
        "| figure | value |", "|---|---|",
        f"| wall time (whole script) | {wall / 60:.1f} min |",
        f"| best epoch | {best['epoch']} of {len(history)} |",
        f"| dev SST acc / Quora acc / STS r (best epoch) | {best['sst_acc']:.3f} / {best['para_acc']:.3f} / {best['sts_pearson']:.3f} |",
        f"| dev SST acc / Quora acc / STS r (last epoch) | {last['sst_acc']:.3f} / {last['para_acc']:.3f} / {last['sts_pearson']:.3f} |",
        f"| dev overall (best) | {best['overall']:.4f} |",
        f"| training ex/s (recipe, mean over epochs) | {recipe_xps:.1f} |",
        f"| training ex/s (bare encoder, same batches) | {bare_xps:.1f} (median step {bare_step:.3f} s) |",
        f"| ratio recipe / bare encoder | {recipe_xps / bare_xps:.2f} |",
        f"| HF peer: transformers.BertModel, same batches, same AdamW, interleaved | {hf_xps:.1f} ex/s "
        f"(median step {hf_step:.3f} s) |",
        f"| ratio bare encoder / HF peer | {bare_xps / hf_xps:.2f} |",
        "| peer: plain HF multitask trainer, same budget (quoted, not re-run) | 0.47 / 0.835 / 0.855, ~25 ex/s |",
    ]
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(os.path.join(os.path.dirname(__file__), "results"), exist_ok=True)
    with open(os.path.join(os.path.dirname(__file__), "results", "multitask.md"), "a") as f:
        f.write(text)


if __name__ == "__main__":
    main()
