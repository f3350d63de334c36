"""
What a training step draws: which task the next batch comes from (the schedules below), and the batch itself
(`TaskData`: a split tokenized once, cut into length-aware, dynamically padded batches; `BatchStream`: endless,
resumable passes over them).

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
(dynamic) schedules, mixing examples of several tasks inside one sub-batch, and a torch Dataset/DataLoader
(tokenizing once is cheap, and building batches in the main process is simple).
"""

import math
from typing import Iterator

import numpy as np
import torch

from minbert.tasks.length_buckets import pad_to_bucket

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


# ----------------------------------------------------------------------------------------------
# A task's examples, tokenized once, and their length-aware batches


def to_device(batch: dict, device) -> dict:
    """A batch's tensors on `device` (its ids list stays as it is)."""
    return {k: v.to(device, non_blocking=True) if torch.is_tensor(v) else v for k, v in batch.items()}


class TaskData:
    """One split of one task, tokenized once.

    For pair tasks, `pair_mode` chooses how pairs are encoded:
    'cross'    -> one sequence [CLS] a [SEP] b [SEP] with token types (tokenizer.encode(texts, pairs));
    'separate' -> two encodings, a and b (for bi-encoder heads); the batch also holds *_b tensors.
    Single-sentence tasks ignore `pair_mode`.

    `label_dtype` defaults to float32 if any label is a float (STS), else long (SST, Quora with
    cross-entropy); pass torch.float32 for Quora trained with BCE-with-logits.
    Unlabeled splits (test files) produce batches without a "labels" key.

    `buckets` (False): pad each batch to the next of a few lengths (minbert.tasks.length_buckets) instead of its
    longest example; `--compile` on CUDA turns it on (length_buckets.use_on), for the few static shapes that
    CUDA graphs need. The padding is masked: the model computes the same for the real tokens either way."""

    def __init__(self, examples: list, tokenizer, max_length: int, pair_mode: str = "cross",
                 label_dtype: torch.dtype | None = None):
        if not examples:
            raise ValueError("TaskData: got no examples")
        if pair_mode not in ("cross", "separate"):
            raise ValueError(f"TaskData: pair_mode must be 'cross' or 'separate', got {pair_mode!r}")
        is_pair = {e.text2 is not None for e in examples}
        if len(is_pair) > 1:
            raise ValueError("TaskData: examples mix single sentences and pairs (some text2 are None)")
        self.is_pair = is_pair.pop()
        self.pair_mode = pair_mode if self.is_pair else None
        self.tokenizer, self.max_length, self.buckets = tokenizer, max_length, False
        self.ids = [e.id for e in examples]

        # tokenize every example once; batches only pad (cached ids, dynamic padding)
        texts = [e.text for e in examples]
        pairs = [e.text2 for e in examples] if self.is_pair else None
        if self.pair_mode == "separate":
            self.input_ids, self.type_ids = tokenizer.encode(texts, None, max_length)
            self.input_ids_b, self.type_ids_b = tokenizer.encode(pairs, None, max_length)
            # padded cost of a batch ~ longest a + longest b, so sort by the sum
            self.lengths = [len(a) + len(b) for a, b in zip(self.input_ids, self.input_ids_b)]
        else:
            self.input_ids, self.type_ids = tokenizer.encode(texts, pairs, max_length)
            self.input_ids_b = self.type_ids_b = None
            self.lengths = [len(a) for a in self.input_ids]

        labels = [e.label for e in examples]
        has_label = {label is not None for label in labels}
        if len(has_label) > 1:
            raise ValueError("TaskData: some examples have labels and some do not")
        self.labels = None
        if has_label.pop():
            if label_dtype is None:
                label_dtype = torch.float32 if any(isinstance(x, float) for x in labels) else torch.long
            self.labels = torch.tensor(labels, dtype=label_dtype)  # (N,)

    def __len__(self) -> int:
        return len(self.ids)

    def batches(self, batch_size: int, shuffle: bool, generator: torch.Generator | None = None) -> Iterator[dict]:
        """Length-aware batches covering every example exactly once.

        shuffle=False (eval): indices sorted by length, cut into batches (minimal padding).
        shuffle=True (train): a random permutation (from `generator`) is split into chunks of
        50 * batch_size; each chunk is sorted by length and cut into batches, and the batch order is
        shuffled. Batches then hold similar lengths but a random mix of examples. The random draws
        happen when batches() is called, not while iterating.

        Each batch dict: input_ids, attention_mask, token_type_ids (B, T) long, plus input_ids_b,
        attention_mask_b, token_type_ids_b in 'separate' mode; labels (B,) if labeled; ids (list of B
        str, for prediction files); index (B,) long, the positions of the examples in this split."""
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        n, by_length = len(self), self.lengths.__getitem__
        if not shuffle:
            order = sorted(range(n), key=by_length)  # stable: ties keep file order
            groups = [order[s:s + batch_size] for s in range(0, n, batch_size)]
        else:
            perm = torch.randperm(n, generator=generator).tolist()
            chunk = 50 * batch_size
            groups = []
            for c in range(0, n, chunk):
                part = sorted(perm[c:c + chunk], key=by_length)
                groups += [part[s:s + batch_size] for s in range(0, len(part), batch_size)]
            # otherwise batches would go short -> long within every chunk
            groups = [groups[g] for g in torch.randperm(len(groups), generator=generator).tolist()]
        return (self._collate(group) for group in groups)

    def _collate(self, group: list[int]) -> dict:
        batch = dict(self.tokenizer.pad([self.input_ids[i] for i in group], [self.type_ids[i] for i in group]))
        if self.input_ids_b is not None:
            b = self.tokenizer.pad([self.input_ids_b[i] for i in group], [self.type_ids_b[i] for i in group])
            batch.update(input_ids_b=b["input_ids"], attention_mask_b=b["attention_mask"],
                         token_type_ids_b=b["token_type_ids"])
        index = torch.tensor(group, dtype=torch.long)  # (B,)
        if self.labels is not None:
            batch["labels"] = self.labels[index]
        batch["ids"] = [self.ids[i] for i in group]
        batch["index"] = index
        return pad_to_bucket(batch, self.max_length, self.tokenizer.pad_id) if self.buckets else batch



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
