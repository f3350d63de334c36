"""
Task sampling schedules for multitask training: which task the next batch comes from.

Stickland & Murray 2019, "BERT and PALs" (arXiv:1902.02671), §4. At every step, pick task i with

    p_i ∝ N_i^α,    N_i = number of training examples of task i.

- proportional: α = 1. Big tasks dominate, so small ones may be underfit.
- sqrt:         α = 0.5.
- annealed:     α = 1 − 0.8·(e − 1)/(E − 1) for the 1-indexed epoch e of E. Training starts
                proportional and ends close to uniform (α = 0.2), so small tasks get more attention
                late, which limits interference from the big task. With E = 1 the formula divides by
                zero, so we define α = 1.
- uniform:      α = 0, p_i = 1/K, drawn at random each step: the "random task scheduler" of
                Pritsky, Somerville & Huynh (CS224N report, §3.1: "at each step of the training,
                the task used for training is sampled randomly"; uniform is our reading, as the
                report gives no weights). Same frequencies as round_robin, random order.
- round_robin:  cycle the tasks in order 0, 1, 2, 0, ... Deterministic; `task_probs` reports it as uniform.

Notes on the variant: the reference code (AsaCooperStickland/Bert-n-Pals, run_multi_task.py)
writes the same schedule with a 0-indexed epoch, α = 1 − 0.8·e/(E − 1). Its default round robin
never advances (task_id is only incremented under `if not args.sample`, and "rr" is truthy), so it
trains the first task only; we avoid that bug. In the reference, an "epoch" is 300 × num_tasks steps,
not a pass over the data. Here the training script decides what an epoch is and calls `set_epoch`.

Heterogeneous steps (`--heterogeneous`; Aghajanyan et al. 2021, "Muppet", arXiv:2101.11038):
one optimizer step aggregates K task-homogeneous sub-batches (K = number of tasks), the way Muppet
builds a heterogeneous batch ("first creating homogenous sub-batches, calculating loss per
sub-batch ..., then aggregating", §5.2 "Importance of Heterogenous Batches"). Muppet §3.4 keeps
"the natural distribution of the datasets" (sampling was "consistently detrimental"), so with
`--heterogeneous_mix natural` (default) the task of each sub-batch is drawn from the schedule,
whose default, proportional, IS the natural distribution: over many steps, task i supplies a
fraction N_i / Σ N of the sub-batches (Quora ~90% with the full data). `every_task` (minbert's
old reading) takes one sub-batch of every task per step, a uniform mix that up-samples the small
tasks ~16x against full Quora. PCGrad/GradVac/Gradient Compromise always take every task per
step: they need one gradient per task.

Deliberately left out: temperature sampling with other α schedules, loss- or metric-driven
(dynamic) schedules, and mixing examples of several tasks inside one sub-batch.
"""

import math

import numpy as np
import torch

SCHEDULES = ("proportional", "sqrt", "annealed", "uniform", "round_robin")
MIXES = ("natural", "every_task")


def heterogeneous_tasks(sampler: "TaskSampler", num_tasks: int, mix: str = "natural") -> list[int]:
    """Task indices of the K = num_tasks sub-batches of one heterogeneous step (repeats allowed)."""
    if mix == "every_task":
        return list(range(num_tasks))
    if mix != "natural":
        raise ValueError(f"heterogeneous_tasks: mix must be one of {MIXES}, got {mix!r}")
    return [sampler.next() for _ in range(num_tasks)]


def anneal_alpha(epoch: int, num_epochs: int) -> float:
    """α = 1 − 0.8·(e − 1)/(E − 1) for the 1-indexed epoch e: 1.0 at e = 1, 0.2 at e = E (1.0 if E = 1)."""
    if not 1 <= epoch <= num_epochs:
        raise ValueError(f"epoch must be in 1..num_epochs={num_epochs} (1-indexed), got {epoch}")
    if num_epochs == 1:
        return 1.0
    return 1.0 - 0.8 * (epoch - 1) / (num_epochs - 1)


def task_probs(sizes: list[int], schedule: str, epoch: int = 1, num_epochs: int = 1) -> np.ndarray:
    """Probability of picking each task, shape (K,) for K tasks; sums to 1. round_robin -> uniform."""
    sizes = np.asarray(sizes, dtype=np.float64)  # (K,)
    if sizes.ndim != 1 or len(sizes) == 0 or (sizes <= 0).any():
        raise ValueError(f"sizes must be a non-empty list of positive example counts, got {sizes.tolist()}")
    if schedule == "round_robin":
        return np.full(len(sizes), 1.0 / len(sizes))
    alpha = {"proportional": 1.0, "sqrt": 0.5, "uniform": 0.0}.get(schedule)
    if schedule == "annealed":
        alpha = anneal_alpha(epoch, num_epochs)
    if alpha is None:
        raise ValueError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
    # 1) weights w_i = N_i^α;  2) p_i = w_i / Σ_j w_j
    weights = sizes ** alpha
    return weights / weights.sum()


class TaskSampler:
    """Draws the task index of each training step.

    round_robin cycles 0, 1, ..., K−1, 0, ...; the other schedules draw from `task_probs` with this
    sampler's own numpy Generator. Other code that uses numpy or torch randomness therefore cannot
    shift the task sequence. `state_dict` / `load_state_dict` continue the sequence exactly after a resume."""

    def __init__(self, sizes: list[int], schedule: str, num_epochs: int, seed: int):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; choose one of {SCHEDULES}")
        self.sizes = [int(n) for n in sizes]
        self.schedule = schedule
        self.num_epochs = num_epochs
        self.rng = np.random.default_rng(seed)
        self.position = 0  # next task for round robin
        self.set_epoch(1)

    def set_epoch(self, epoch: int) -> None:
        """Switch to the probabilities of the 1-indexed `epoch` (only 'annealed' changes with it)."""
        self.probs = task_probs(self.sizes, self.schedule, epoch, self.num_epochs)  # (K,)
        self.epoch = epoch

    def next(self) -> int:
        if self.schedule == "round_robin":
            task = self.position
            self.position = (self.position + 1) % len(self.sizes)
            return task
        # inverse-CDF sampling, i.e. what rng.choice(K, p=probs) does, but without its per-call checks:
        # 1) u ~ U[0, 1);  2) the task is the first i whose cumulative probability exceeds u
        u = self.rng.random()
        task = int(np.searchsorted(np.cumsum(self.probs), u, side="right"))
        return min(task, len(self.sizes) - 1)  # the cumsum may end at 1 − 1e-16 < u

    def state_dict(self) -> dict:
        return {"sizes": list(self.sizes), "schedule": self.schedule, "num_epochs": self.num_epochs,
                "epoch": self.epoch, "position": self.position, "rng": self.rng.bit_generator.state}

    def load_state_dict(self, state: dict) -> None:
        saved = (state["sizes"], state["schedule"], state["num_epochs"])
        if saved != (self.sizes, self.schedule, self.num_epochs):
            raise ValueError(f"TaskSampler.load_state_dict: saved (sizes, schedule, num_epochs) = {saved}, "
                             f"but this sampler has {(self.sizes, self.schedule, self.num_epochs)}")
        self.rng.bit_generator.state = state["rng"]
        self.position = state["position"]
        self.set_epoch(state["epoch"])


class BatchStream:
    """Endless training batches of one task: pass after pass over its TaskData.

    Pass k is shuffled by a torch.Generator seeded with (seed, k), so the batch order depends
    only on (seed, pass, position). `state_dict` is two integers, and a resumed run replays
    exactly the batches an uninterrupted run would have seen. Small tasks simply start new
    passes while a big task is still in its first (the reference code's itertools.cycle)."""

    def __init__(self, data, batch_size: int, seed: int):
        self.data, self.batch_size, self.seed = data, batch_size, seed
        self.passes, self.position = 0, 0   # completed passes; batches taken in the current pass
        self._batches = None

    def next(self) -> dict:
        if self._batches is None:
            g = torch.Generator().manual_seed(self.seed * 1_000_003 + self.passes)
            self._batches = self.data.batches(self.batch_size, shuffle=True, generator=g)
            for _ in range(self.position):   # after a resume: skip what was already used
                next(self._batches)
        batch = next(self._batches, None)
        if batch is None:                    # pass finished: start the next one
            self.passes, self.position, self._batches = self.passes + 1, 0, None
            return self.next()
        self.position += 1
        return batch

    def state_dict(self) -> dict:
        return {"passes": self.passes, "position": self.position}

    def load_state_dict(self, state: dict) -> None:
        self.passes, self.position, self._batches = state["passes"], state["position"], None


# ---------------------------------------------------------------------------------------------- flags
def describe(args) -> list[tuple[str, str]]:
    """--dry_run's rows for train_multitask.py: each task's training examples (read as the run reads them, --limit
    applied; nothing tokenized) and the optimizer steps they make (steps_per_epoch, one process)."""
    import copy
    from minbert.core.errors import UserError
    from minbert.tasks import data
    resolved = copy.copy(args)
    data.resolve_paths(resolved)   # the files --data_dir implies, on a copy
    try:
        rows = {t: len(read(getattr(resolved, f"{t}_train"))[: args.limit or None]) for t, read in data.READERS.items()}
    except UserError as e:
        return [("train data", f"the run would stop: {e}")]
    _, steps = steps_per_epoch(args, list(rows.values()), rows["sst"])
    return [("train data", ", ".join(f"{t} {n:,}" for t, n in rows.items()) + " examples"),
            ("steps", f"{steps:,} per epoch x {args.epochs} epochs = {steps * args.epochs:,} optimizer steps "
                      f"(batch {args.batch_size} x --grad_accum {args.grad_accum})")]


def add_args(parser) -> None:
    g = parser.add_argument_group("task sampling (Stickland & Murray 2019 §4; Muppet, arXiv:2101.11038)")
    g.add_argument("--schedule", choices=SCHEDULES, default="proportional",
                   help="how the task of each batch is chosen (annealed: PALs; uniform: Pritsky et al.)")
    g.add_argument("--heterogeneous", action="store_true",
                   help="every optimizer step aggregates K = 3 sub-batches (Muppet §3.4); see --heterogeneous_mix")
    g.add_argument("--heterogeneous_mix", choices=MIXES, default="natural",
                   help="with --heterogeneous: natural = each sub-batch draws its task from --schedule (proportional = "
                        "Muppet's natural distribution); every_task = one sub-batch of every task")
    g.add_argument("--extra_sst_pass", action="store_true",
                   help="end each epoch with one pass of SST-only steps (Song/Hu/Pan, against Quora's dominance)")


def batches_per_step(args, num_tasks: int) -> int:
    """How many batches one micro-batch of a train_multitask.py step takes (this rule is written here only):
    N with --grad_compromise N, one of each of the K = num_tasks tasks with --heterogeneous or a gradient
    surgery (PCGrad/GradVac need one gradient per task), else one batch of one task."""
    if args.grad_compromise:
        return args.grad_compromise
    return num_tasks if args.heterogeneous or args.surgery != "none" else 1


def step_tasks(args, sampler: TaskSampler, compromise, epoch: int, tasks: list[str]) -> list[str]:
    """The tasks of one micro-batch's batches, batches_per_step(args, len(tasks)) of them, drawn with the
    sampler's rng (so a resumed run draws the same ones)."""
    if compromise:   # each task once, the rest by Gradient Compromise's corrected PAL schedule (its Alg. 1)
        return compromise.tasks(epoch, sampler.rng)
    if batches_per_step(args, len(tasks)) == 1:
        return [tasks[sampler.next()]]
    if args.heterogeneous and args.surgery == "none":   # Muppet: K sub-batches in the natural task mix
        return [tasks[i] for i in heterogeneous_tasks(sampler, len(tasks), args.heterogeneous_mix)]
    return list(tasks)


def steps_per_epoch(args, sizes: list[int], sst_size: int, world_size: int = 1) -> tuple[int, int]:
    """(steps drawn from the schedule, all steps) of one epoch of train_multitask.py. The schedule's steps make
    one pass over all training data in expectation (--steps_per_epoch overrides it); --extra_sst_pass adds one
    pass over SST at the end. Under torchrun a batch is global, batch_size x world_size examples shared by the
    ranks (minbert/run/distributed.py), so both passes take world_size times fewer steps."""
    examples = args.batch_size * world_size * args.grad_accum   # of one task batch, over the ranks and micro-batches
    schedule = args.steps_per_epoch or math.ceil(sum(sizes) / (examples * batches_per_step(args, len(sizes))))
    sst_pass = math.ceil(sst_size / examples) if args.extra_sst_pass else 0
    return schedule, schedule + sst_pass
