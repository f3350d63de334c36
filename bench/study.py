"""The multitask study: every method x seeds at one stated budget, and what each method does to dev scores.

Like bench.mml_study for the MML paper, this answers "does this method help here?" for the CS224N methods with
paired seeds. Each (configuration, seed) is a subprocess of train_multitask.py (or a pipeline of stages) in its own
folder OUT_DIR/CONFIG/seedS, so a crash or Ctrl-C loses at most one run's progress:
  - a finished run (its outputs.pt and every epoch in metrics.jsonl) is skipped;
  - an interrupted one continues from its newest checkpoint (interrupted.pt or last.pt, `--resume`);
so rerunning the same command finishes an interrupted study and ends with the same table as an uninterrupted one.

Configurations (`CONFIGS`; each adds flags to the common budget, the arguments after `--`):
  baseline, pals, smart, r3f, pcgrad, gradvac, grad_compromise, grad_compromise_normalize (its other reading:
  each loss weighted by S / Σ S, see minbert/methods/gradient_compromise.py), annealed, mnr (Benton: cosine STS
  head, dot-scored MNR on positives-only batches, first half of the epochs), concat (Benton's one-pass tanh STS head),
  simcse (python -m minbert simcse on the CS224N training sentences, then fine-tuning from its encoder),
  cosine (mnr's cosine STS head without MNR: the control for MNR), baseline_accum4 (4 batches per update, as Gradient
  Compromise: the control for its fewer, larger updates), baseline_every_task (one batch of each task per
  update, summed: PCGrad's and GradVac's three task batches and 63 updates per epoch without the surgery, their
  control), head_pretraining (Pritsky et al.: each head alone first,
  a frozen-encoder pass over every training set on top of the budget: 30,582 examples on the shipped data),
  head_pretraining_charged (the same, paid from the budget: fine-tuning is cut by the head pass's cost, a frozen
  example at 1/3 of a trained one, FROZEN_EXAMPLE_COST), pals_after (Pritsky et al. §3.3.2: fine-tune for
  E − 1 epochs, then PALs alone for 1, the same total epochs as the baseline), ensemble (the baseline seeds'
  outputs averaged with uniform weights by python -m minbert ensemble: nothing is fitted on dev).
A configuration's SimCSE or head-pretraining steps come on top of the budget (the paper pipelines pay them too),
except head_pretraining_charged's.

Selection (--select_epoch): a run is scored, and its outputs.pt (ensembles, bootstraps) written, at the final epoch,
fixed in advance (last, the default), so no choice is made on the dev set that is scored; `best` (the epoch with the
best dev overall, train_multitask.py's default) is how the studies before it were made, and how their tables are
rewritten. --seeds_per_config NAME=N runs NAME on the first N seeds only (a plan whose power calculation asks each
claim for its own number of seeds); its differences pair the seeds it shares with the baseline or its control.

Outputs in OUT_DIR:
  table.md / table.json   scores, paired differences from the baseline and from each configuration's control, with
  study.png               Holm-adjusted p (bench/study_table.py says how they are computed).
  machine.json            CPU, native bf16 or not, GPU, torch, load, of the latest invocation.
  commands.txt            every command run, exactly, across invocations: each invocation appends a "# date:
                          machine" line and then its commands; a study continued in a fresh OUT_DIR carries on
                          the history kept in --results_dir.
  --results_dir DIR gets a copy of those small files (e.g. bench/results/study), the table so far after every
  seed, and each finished run's metrics.jsonl and outputs.pt under DIR/runs/: commit them, and a later session
  (whose OUT_DIR is gone) skips those runs. The runs stay in OUT_DIR, and a finished run's best.pt/last.pt are
  deleted (it keeps metrics.jsonl, outputs.pt and model/) unless
  --keep_checkpoints: 45 MiniLM runs would otherwise fill ~25 GB.

    python bench/study.py --configs baseline,pals,smart --seeds 1,2,3 --out_dir runs/study -- --model minilm-l6 ...
Left out: running seeds in parallel (one run at a time; two studies with disjoint --configs can share the seeds),
test-set scores.
"""

import argparse
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
import time
import warnings

try:
    import fcntl
except ImportError:   # Windows has no flock(2): there, run one study process per --out_dir
    fcntl = None

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))  # run from anywhere
from minbert.core import flags  # noqa: E402
from minbert.core.errors import UserError, cli  # noqa: E402
from minbert.core.flags import at_least  # noqa: E402
from minbert.core.recipes import dry_run  # noqa: E402
from bench.study_table import CONTROLS, METRICS, describe, machine, plot, summarise, write_table  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The budget proposed for a 2-core CPU (docs/studies.md, "What the studies test at small scale"): MiniLM, shipped data.
# No --limit: it would cut every task to the same size and erase the size imbalance that annealed sampling and
# Muppet's natural mix are about; --examples_per_epoch (a study flag) sets the compute instead.
DEFAULT_BUDGET = ["--model", "minilm-l6", "--pooling", "mean", "--lr", "1e-4", "--head_lr", "1e-3",
                  "--hidden_dropout_prob", "0.1", "--batch_size", "32", "--epochs", "2",
                  # dev scores only: no test predictions
                  "--sst_test", "none", "--para_test", "none", "--sts_test", "none"]
# An example read with the encoder frozen (one forward under no_grad) costs 1/3 of a fine-tuning example (forward
# and backward): the usual 2N vs 6N FLOPs per token of a model with N parameters (Kaplan et al. 2020, §2.1).
FROZEN_EXAMPLE_COST = 1 / 3

CONFIGS = {
    "baseline": [],
    "pals": ["--pals"],
    "smart": ["--smart", "1"],
    "r3f": ["--r3f", "1"],
    "pcgrad": ["--surgery", "pcgrad"],
    "gradvac": ["--surgery", "gradvac"],
    "grad_compromise": ["--grad_compromise", "4"],
    "grad_compromise_normalize": ["--grad_compromise", "4", "--grad_compromise_normalize"],   # S / Σ S: no step shrink
    "annealed": ["--schedule", "annealed"],
    "mnr": ["--sts_head", "cosine", "--mnr", "1", "--mnr_score", "dot", "--mnr_schedule", "first_half"],
    "concat": ["--sts_head", "cross_tanh"],
    # Controls (docs/studies.md). cosine: mnr's STS head without MNR, so MNR's own effect is mnr − cosine (paired by
    # seed).
    # baseline_accum4: the baseline with Gradient Compromise's 4 batches per update (47 updates per epoch, not 188),
    # so grad_compromise − baseline_accum4 is the method at an equal number of updates.
    "cosine": ["--sts_head", "cosine"],
    "baseline_accum4": ["--grad_accum", "4"],
    # baseline_every_task: PCGrad's and GradVac's update without the surgery: one batch of each task per update (the
    # same streams, so the same batches as theirs at a seed), their losses summed; 63 updates per epoch, not 188.
    "baseline_every_task": ["--heterogeneous", "--heterogeneous_mix", "every_task"],
    "simcse": [],              # stage 1: python -m minbert simcse (SIMCSE_ARGS); stage 2: --model its encoder
    "head_pretraining": ["--head_pretrain_epochs", "1"],   # Pritsky et al.: 25, patience 3; 1 at this budget
    # head_pretraining charged to the budget: the same head pass, and fewer fine-tuning examples by what the
    # pass costs (head_pass_cost: FROZEN_EXAMPLE_COST of a fine-tuning example for each example it reads).
    "head_pretraining_charged": ["--head_pretrain_epochs", "1"],
    "pals_after": [],          # stage 1: E − 1 epochs of fine-tuning; stage 2: --pals_after, 1 epoch
    "ensemble": [],            # python -m minbert ensemble over the baseline seeds
}
SIMCSE_ARGS = ["--data", "cs224n", "--batch_size", "64", "--lr", "3e-5"]   # + --max_steps (--simcse_steps)


# ---------------------------------------------------------------------- runs


def read_metrics(run_dir: str) -> list[dict]:
    path = os.path.join(run_dir, "metrics.jsonl")
    if not os.path.isfile(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def finished(run_dir: str, epochs: int) -> bool:
    """outputs.pt is written after the last epoch and the predictions: the run is complete."""
    done = {r["epoch"] for r in read_metrics(run_dir)}
    return os.path.isfile(os.path.join(run_dir, "outputs.pt")) and done >= set(range(1, epochs + 1))


def latest_checkpoint(run_dir: str) -> str | None:
    found = [p for p in (os.path.join(run_dir, n) for n in ("interrupted.pt", "last.pt")) if os.path.isfile(p)]
    return max(found, key=os.path.getmtime) if found else None


def budget_epochs(budget: list[str]) -> int:
    """The --epochs of the budget (train_multitask.py's default 10 when absent)."""
    for i, token in enumerate(budget):
        if token == "--epochs":
            return int(budget[i + 1])
        if token.startswith("--epochs="):
            return int(token.split("=", 1)[1])
    return 10


def with_epochs(budget: list[str], epochs: int) -> list[str]:
    out, skip = [], False
    for token in budget:
        if skip:
            skip = False
        elif token == "--epochs":
            skip = True
        elif not token.startswith("--epochs="):
            out.append(token)
    return out + ["--epochs", str(epochs)]


def budget_value(budget: list[str], flag: str, default: str) -> str:
    for i, token in enumerate(budget):
        if token == flag and i + 1 < len(budget):
            return budget[i + 1]
    return default


def head_pass_cost(budget: list[str]) -> float:
    """What one head-pretraining epoch costs, in fine-tuning examples: each training example once and each dev
    example once (the score after the pass), all with the encoder frozen, at FROZEN_EXAMPLE_COST each."""
    from minbert.tasks.data import READERS, default_paths
    paths, _ = default_paths(budget_value(budget, "--data_dir", "data"))
    limit = int(budget_value(budget, "--limit", "0")) or None
    with warnings.catch_warnings():   # the training run reports skipped rows itself
        warnings.simplefilter("ignore")
        read = sum(len(READERS[task](budget_value(budget, f"--{task}_{split}", paths[f"{task}_{split}"]))[:limit])
                   for task in READERS for split in ("train", "dev"))
    return read * FROZEN_EXAMPLE_COST


def steps_per_epoch(name: str, budget: list[str], examples: int) -> list[str]:
    """--steps_per_epoch giving `examples` training examples per epoch to configuration `name` ([] for 0);
    head_pretraining_charged gets that less its head pass's cost, spread over the epochs."""
    if not examples:
        return []
    if name == "head_pretraining_charged":
        examples -= head_pass_cost(budget) / budget_epochs(budget)
    return ["--steps_per_epoch", str(max(1, math.ceil(examples / examples_per_step(name, budget))))]


def examples_per_step(name: str, budget: list[str]) -> int:
    """Training examples one optimizer step of configuration `name` reads: --batch_size x --grad_accum x the task
    batches of a micro-batch, by the training script's own rule (sampling.batches_per_step), so that every
    configuration sees the same examples per epoch. The flags as train_command orders them: the last one wins."""
    from minbert.tasks.data import READERS
    from minbert.tasks.sampling import batches_per_step
    command = budget + CONFIGS[name]

    def last(flag: str, default: str) -> str:
        values = [command[i + 1] for i, token in enumerate(command[:-1]) if token == flag]
        return values[-1] if values else default
    args = argparse.Namespace(grad_compromise=int(last("--grad_compromise", "0")), surgery=last("--surgery", "none"),
                              heterogeneous="--heterogeneous" in command)
    return int(last("--batch_size", "8")) * int(last("--grad_accum", "1")) * batches_per_step(args, len(READERS))


def train_command(budget: list[str], extra: list[str], seed: int, run_dir: str,
                  select_epoch: str = "last") -> list[str]:
    """train_multitask.py with the budget, the configuration's flags, the seed, the epoch kept (--select_epoch), and
    every output inside run_dir."""
    outs = []
    for task in ("sst", "para", "sts"):
        for split in ("dev", "test"):
            outs += [f"--{task}_{split}_out", os.path.join(run_dir, "predictions", f"{task}-{split}-output.csv")]
    return [sys.executable, os.path.join(ROOT, "train_multitask.py"), *budget, *extra, "--seed", str(seed),
            "--select_epoch", select_epoch, "--out_dir", run_dir, *outs]


SMALL_FILES = ("metrics.jsonl", "outputs.pt")   # what a finished run is scored and ensembled from


class Runner:
    """Runs commands one at a time, logs them to commands.txt, stops the study when a run is interrupted."""

    def __init__(self, out_dir: str, max_runs: int = 0, in_process: bool = False, keep_checkpoints: bool = False,
                 results_dir: str | None = None, tables_only: bool = False, select_epoch: str = "last"):
        self.out_dir, self.max_runs, self.started, self.in_process = out_dir, max_runs, 0, in_process
        self.keep_checkpoints, self.results_dir, self.tables_only = keep_checkpoints, results_dir, tables_only
        self.select_epoch = select_epoch

    def saved(self, run_dir: str) -> str | None:
        """Where --results_dir keeps a run's small files (results_dir/runs/<config>/seed<k>/...), or None."""
        if not self.results_dir:
            return None
        return os.path.join(self.results_dir, "runs", os.path.relpath(run_dir, self.out_dir))

    def restore(self, run_dir: str, epochs: int) -> bool:
        """Whether the run is finished: here, or in an earlier session whose small files were committed under
        --results_dir (they are copied back, so the tables and ensembles read them as usual)."""
        saved = self.saved(run_dir)
        if not finished(run_dir, epochs) and saved and finished(saved, epochs):
            os.makedirs(run_dir, exist_ok=True)
            for name in SMALL_FILES:
                shutil.copy(os.path.join(saved, name), os.path.join(run_dir, name))
        return finished(run_dir, epochs)

    def keep(self, run_dir: str) -> None:
        """Copy a finished run's small files under --results_dir (commit them: a later session skips the run)."""
        saved = self.saved(run_dir)
        if saved:
            os.makedirs(saved, exist_ok=True)
            for name in SMALL_FILES:
                shutil.copy(os.path.join(run_dir, name), os.path.join(saved, name))

    def tidy(self, run_dir: str) -> None:
        """A finished run needs only metrics.jsonl, outputs.pt (ensembles) and model/ (the next stage): its
        checkpoints (best.pt, last.pt, ~4x the model each with the optimizer state) go, unless --keep_checkpoints."""
        if not self.keep_checkpoints:
            for name in ("best.pt", "last.pt", "interrupted.pt"):
                path = os.path.join(run_dir, name)
                if os.path.isfile(path):
                    os.remove(path)

    @staticmethod
    def call_in_process(command: list[str]) -> int:
        """The same command as a function call in this process (--in_process: tests, debugging)."""
        import importlib
        if command[1:3] == ["-m", "minbert"]:          # python -m minbert <command> ...
            from minbert.__main__ import COMMANDS
            entry, argv = importlib.import_module(COMMANDS[command[3]][0]).main, command[4:]
        elif command[1] == "-m":
            entry, argv = importlib.import_module(command[2]).main, command[3:]
        else:
            sys.path.insert(0, os.path.dirname(command[1]))
            entry, argv = importlib.import_module(os.path.basename(command[1])[:-3]).main, command[2:]
        try:
            entry(argv)
        except SystemExit as e:
            return e.code if isinstance(e.code, int) else 1
        return 0

    def run(self, command: list[str], log: str) -> None:
        if self.max_runs and self.started >= self.max_runs:
            raise StopStudy(f"--max_runs {self.max_runs} reached: rerun the same command to continue")
        self.started += 1
        line = shlex.join(command)
        with open(os.path.join(self.out_dir, "commands.txt"), "a") as f:
            f.write(line + "\n")
        print(f"run: {line}\n  log: {log}", flush=True)
        os.makedirs(os.path.dirname(log), exist_ok=True)
        if self.in_process:
            status = self.call_in_process(command)
            if status != 0:
                raise StopStudy(f"a run stopped with exit status {status}; rerun the same command to continue it")
            return
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, *filter(None, [os.environ.get("PYTHONPATH")])]))
        with open(log, "a") as f:
            proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, env=env)
            try:
                status = proc.wait()
            except KeyboardInterrupt:   # the run got the same Ctrl-C: let it save interrupted.pt, then stop
                status = proc.wait()
                raise StopStudy(f"interrupted (the run saved its state, exit status {status}); "
                                "rerun the same command to continue") from None
        if status != 0:
            raise StopStudy(f"a run stopped with exit status {status} (see {log}); rerun the same "
                            "command to continue it")

    def train(self, budget, extra, seed, run_dir) -> None:
        """One train_multitask.py run, skipped when finished, resumed when a checkpoint exists."""
        if self.restore(run_dir, budget_epochs(budget)):
            print(f"skip {run_dir}: finished")
            self.tidy(run_dir)
            return
        if self.tables_only:
            raise StopStudy(f"{run_dir} has no finished record and --tables_only trains nothing: "
                            "drop the flag to run it")
        os.makedirs(os.path.dirname(run_dir), exist_ok=True)
        with open(os.path.join(os.path.dirname(run_dir), f".{os.path.basename(run_dir)}.lock"), "w") as lock:
            if fcntl:   # two studies sharing an out_dir: one run, one process (the kernel drops the lock when it dies)
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    raise StopStudy(f"{run_dir} is being trained by another process; rerun this study when it has "
                                    "finished (this one would have resumed it from its checkpoint)") from None
            command = train_command(budget, extra, seed, run_dir, self.select_epoch)
            resume = latest_checkpoint(run_dir)
            if resume:   # cut short (Ctrl-C: interrupted.pt; killed: last.pt): continue it exactly
                command += ["--resume", resume]
            self.run(command, os.path.join(run_dir, "log.txt"))
            self.tidy(run_dir)
            self.keep(run_dir)


class StopStudy(Exception):
    pass


def run_config(runner: Runner, name: str, seed: int, budget: list[str], out_dir: str, simcse_steps: int = 200,
               examples: int = 0) -> str:
    """Run (or resume) one configuration at one seed; returns the folder whose metrics.jsonl scores it."""
    run_dir = os.path.join(out_dir, name, f"seed{seed}")
    budget = budget + steps_per_epoch(name, budget, examples)
    if name in ("simcse", "pals_after") and runner.restore(run_dir, 1 if name == "pals_after"
                                                           else budget_epochs(budget)):
        return run_dir   # finished in an earlier session: its first stage is not needed again
    if name == "simcse":
        encoder = os.path.join(run_dir, "simcse")
        if not os.path.isfile(os.path.join(encoder, "model", "config.json")):
            command = [sys.executable, "-m", "minbert", "simcse", "--model",
                       budget_value(budget, "--model", "bert-base-uncased"),
                       "--data_dir", budget_value(budget, "--data_dir", "data"), "--pooling",
                       "mean" if budget_value(budget, "--pooling", "pooler") == "mean" else "cls",
                       *SIMCSE_ARGS, "--max_steps", str(simcse_steps), "--seed", str(seed), "--out_dir", encoder,
                       "--overwrite"]   # the study's own folder: a stage cut short is redone
            runner.run(command, os.path.join(run_dir, "simcse-log.txt"))
        runner.train(budget, ["--model", os.path.join(encoder, "model")], seed, run_dir)
    elif name == "pals_after":
        epochs = budget_epochs(budget)
        if epochs < 2:
            raise UserError("pals_after at an equal budget needs --epochs >= 2 (E − 1 epochs of "
                            "fine-tuning, then 1 of PALs)")
        first = os.path.join(run_dir, "finetune")
        runner.train(with_epochs(budget, epochs - 1), [], seed, first)
        runner.train(with_epochs(budget, 1), ["--pals_after", first], seed, run_dir)
    else:
        runner.train(budget, CONFIGS[name], seed, run_dir)
    return run_dir


def kept_scores(run_dir: str, select_epoch: str) -> dict:
    """Dev scores of the kept model: the final epoch (last), or the epoch with the best overall (best: the first on
    ties, as best.pt)."""
    records = read_metrics(run_dir)
    if not records:
        raise UserError(f"{run_dir}: no metrics.jsonl; the run did not finish")
    if select_epoch == "last":
        kept = max(records, key=lambda r: r["epoch"])
    else:
        kept = max(records, key=lambda r: (r["overall"], -r["epoch"]))
    return {m: kept[m] for m in METRICS}


def ensemble_scores(runner: Runner, seeds: list[int], out_dir: str) -> dict:
    """Uniform average of the baseline seeds (python -m minbert ensemble); its dev scores."""
    folder = os.path.join(out_dir, "ensemble")
    result = os.path.join(folder, "members.json")
    members = [os.path.join(out_dir, "baseline", f"seed{s}") for s in seeds]
    if not os.path.isfile(result):
        runner.run([sys.executable, "-m", "minbert", "ensemble", *members, "--method", "average", "--weights",
                    "uniform",
                    "--out_dir", folder, "--overwrite"], os.path.join(folder, "log.txt"))   # redone if cut short
    with open(result) as f:
        row = json.load(f)["rows"][-1]
    # A paired bootstrap over the dev examples (the only thing one ensemble can be resampled over): dev overall of
    # the ensemble (column 0) and of each member alone (columns 1..K) on the same 2000 resamples.
    from minbert.core.export import load_outputs
    from minbert.tools.ensemble import aligned
    from bench.seed_example_bootstrap import bootstrap_overall
    dev = aligned([load_outputs(m) for m in members], "dev")
    one_hot = [[float(j == k) for j in range(len(members))] for k in range(len(members))]
    return {**{m: row[m] for m in METRICS},
            "bootstrap_overall": bootstrap_overall(dev, [[1.0] * len(members), *one_hot]).tolist()}


# ---------------------------------------------------------------------- the command


def add_args(p) -> None:
    g = p.add_argument_group("The multitask study (docs/studies.md)")
    g.add_argument("--configs", default=",".join(CONFIGS),
                   help=f"comma list of configurations, from {', '.join(CONFIGS)}")
    g.add_argument("--seeds", default="1,2,3", help="comma list of seeds; every configuration runs every seed (paired)")
    g.add_argument("--seeds_per_config", default="",
                   help="NAME=N,...: NAME runs on the first N of --seeds only (a plan giving each claim the seeds its "
                        "power calculation asks for); the baseline and controls should run them all")
    g.add_argument("--select_epoch", choices=("last", "best"), default="last",
                   help="the epoch each run is scored at: last = the final epoch, fixed in advance (no choice on the "
                        "scored dev set); best = the best dev overall (how the studies before it were made)")
    g.add_argument("--examples_per_epoch", type=at_least(0), default=6000,
                   help="training examples per epoch of every run (sets --steps_per_epoch per "
                        "configuration; 0: one pass)")
    g.add_argument("--simcse_steps", type=at_least(1), default=200,
                   help="SimCSE steps (batch 64, CS224N sentences) of the simcse configuration")
    g.add_argument("--max_runs", type=at_least(0), default=0,
                   help="stop after starting N runs (0 = all): a study in slices")
    g.add_argument("--in_process", action="store_true",
                   help="run every stage as a function call in this process, not a subprocess (tests, debugging)")
    g.add_argument("--keep_checkpoints", action="store_true",
                   help="keep best.pt/last.pt of finished runs (default: deleted; ~0.5 GB per MiniLM run)")
    g.add_argument("--tables_only", action="store_true",
                   help="train nothing: rewrite the tables from the finished records in --results_dir, keeping the "
                        "machine they were measured on")
    g.add_argument("--results_dir", default=None,
                   help="also copy table.md/.json, study.png, machine.json, commands.txt here (e.g. "
                        "bench/results/study)")
    g.add_argument("--out_dir", default="runs/study",
                   help="one folder per run, table.md/.json, study.png, machine.json, commands.txt")


def parse_args(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    budget = argv[argv.index("--") + 1:] if "--" in argv else list(DEFAULT_BUDGET)
    own = argv[: argv.index("--")] if "--" in argv else argv
    p = flags.ArgumentParser(prog="python bench/study.py", description=__doc__,
                             epilog="Arguments after -- are the budget: train_multitask.py flags shared by every run "
                                    f"(default: {shlex.join(DEFAULT_BUDGET)})")
    add_args(p)
    args = p.parse_args(own)
    args.budget = budget
    dry_run(p, own, args)   # --dry_run (every flags.ArgumentParser has it): the configuration, budget included
    try:
        args.seeds = [int(s) for s in args.seeds.split(",")]
    except ValueError:
        p.error(f"--seeds {args.seeds}: expected a comma list of integers, e.g. 1,2,3")
    args.configs = [c for c in args.configs.split(",") if c]
    for c in args.configs:
        if c not in CONFIGS:
            p.error(f"--configs: {flags.unknown('configuration', c, CONFIGS)}")
    args.seeds_of = {c: list(args.seeds) for c in args.configs}
    for item in filter(None, args.seeds_per_config.split(",")):
        name, _, n = item.partition("=")
        if name not in args.configs or not n.isdigit() or not 1 <= int(n) <= len(args.seeds):
            p.error(f"--seeds_per_config {item!r}: expected NAME=N with NAME in --configs and N in "
                    f"1..{len(args.seeds)}")
        args.seeds_of[name] = args.seeds[:int(n)]
    if "ensemble" in args.configs and "baseline" not in args.configs:
        p.error("--configs ensemble averages the baseline seeds: add baseline")
    for flag in ("--seed", "--out_dir", "--resume", *(("--steps_per_epoch",) if args.examples_per_epoch else ())):
        if flag in budget:
            p.error(f"the budget (after --) may not set {flag}: the study sets it per run")
    return args


def main(argv=None):
    args = parse_args(argv)
    args.out_dir = os.path.abspath(args.out_dir)
    os.makedirs(args.out_dir, exist_ok=True)
    kept = os.path.join(args.results_dir or "", "machine.json")
    if args.tables_only and args.results_dir and os.path.isfile(kept):   # the machine the records were measured on
        with open(kept) as f:
            record = json.load(f)
        measured_on, made_with = record["machine"], record.get("select_epoch", "best")   # older studies: best
        if made_with != args.select_epoch:
            raise UserError(f"{kept}: its runs were scored and their outputs.pt written with "
                            f"--select_epoch {made_with}; "
                            f"rewrite their tables with --select_epoch {made_with}")
    else:
        measured_on = machine()
    header = {"budget": args.budget, "examples_per_epoch": args.examples_per_epoch, "seeds": args.seeds,
              "configs": args.configs,
              "select_epoch": args.select_epoch,
              "fewer_seeds": {c: len(s) for c, s in args.seeds_of.items() if len(s) < len(args.seeds)},
              "machine": measured_on}
    if not args.tables_only:   # a table rewrite runs nothing: machine.json and commands.txt stay as they are
        with open(os.path.join(args.out_dir, "machine.json"), "w") as f:
            json.dump(header, f, indent=1)
        continue_history(args.out_dir, args.results_dir, header["machine"])
    runner = Runner(args.out_dir, args.max_runs, args.in_process, args.keep_checkpoints, args.results_dir,
                    args.tables_only,
                    args.select_epoch)
    scores = {}
    try:
        # Seed-major order: a study stopped early has every configuration for the seeds it finished.
        for done, seed in enumerate(args.seeds, 1):
            for name in args.configs:
                if name != "ensemble" and seed in args.seeds_of[name]:
                    run = run_config(runner, name, seed, args.budget, args.out_dir, args.simcse_steps,
                                     args.examples_per_epoch)
                    scores.setdefault(name, {})[seed] = kept_scores(run, args.select_epoch)
            if done < len(args.seeds):   # the table so far: a study stopped early still reports its finished seeds
                report(args, summarise(scores, args.seeds[:done], None), header)
        ensemble = ensemble_scores(runner, args.seeds, args.out_dir) if "ensemble" in args.configs else None
    except StopStudy as e:
        print(f"study stopped: {e}")
        return None
    summary = summarise(scores, args.seeds, ensemble, resample(args.out_dir, scores, args.seeds))
    print(report(args, summary, header))
    return summary


def resample(out_dir: str, scores: dict, seeds: list[int]) -> dict:
    """The seed × example bootstrap of each configuration's Δ overall against the baseline and against its control,
    over the seeds both ran, from the runs' outputs.pt (bench.seed_example_bootstrap)."""
    from minbert.core.export import load_outputs
    from bench.seed_example_bootstrap import seed_example_bootstrap
    out = {}
    for name in scores:
        for key, other in (("baseline", "baseline"), ("control", CONTROLS.get(name))):
            if name == other or other not in scores:
                continue
            shared = [s for s in seeds if s in scores[name] and s in scores[other]]
            if len(shared) >= 2:
                runs = [[load_outputs(os.path.join(out_dir, n, f"seed{s}")) for s in shared] for n in (name, other)]
                out.setdefault(name, {})[key] = seed_example_bootstrap(*runs)["overall"].tolist()
    return out


def continue_history(out_dir: str, results_dir: str | None, m: dict) -> None:
    """commands.txt is the study's whole record: a fresh out_dir starts from the copy kept in results_dir (so a
    study finished in a later session keeps the first session's commands), then this invocation's header line."""
    path = os.path.join(out_dir, "commands.txt")
    kept = os.path.join(results_dir, "commands.txt") if results_dir else ""
    if not os.path.isfile(path) and os.path.isfile(kept):
        shutil.copy(kept, path)
    with open(path, "a") as f:
        f.write(f"# {time.strftime('%Y-%m-%d %H:%M')}: {describe(m)}, torch {m['torch']}\n")


def report(args, summary: dict, header: dict) -> str:
    """table.md/.json and study.png in --out_dir, copied with machine.json and commands.txt to --results_dir."""
    md = write_table(args.out_dir, summary, header)
    plot(os.path.join(args.out_dir, "study.png"), summary)
    if args.results_dir:   # the small files worth committing; the runs stay in out_dir
        os.makedirs(args.results_dir, exist_ok=True)
        # a rewrite keeps them
        records = () if getattr(args, "tables_only", False) else ("machine.json", "commands.txt")
        for name in ("table.md", "table.json", "study.png", *records):
            if os.path.isfile(os.path.join(args.out_dir, name)):
                shutil.copy(os.path.join(args.out_dir, name), os.path.join(args.results_dir, name))
    return md


if __name__ == "__main__":
    cli(main)
