"""Gradient Compromise: a PAL-style task schedule inside each GradVac update.

Pritsky, Somerville & Huynh, "BERT: A Master of All Trades or Jack of None?" (Stanford CS224N
default-project report; no arXiv id), §3.2.4 and Algorithm 1. GradVac (minbert/methods/gradvac.py)
needs one gradient per task per update, which forces a round-robin schedule; the PAL schedule
(Stickland & Murray 2019, arXiv:1902.02671) samples tasks by dataset size. Gradient Compromise
keeps both: one update = a "batch of batches" of n batches, every task present at least once, the
other n − 3 chosen by a corrected PAL schedule. Algorithm 1, for the 1-indexed epoch e of N_e:

    1) α ← 1 − 0.8·(e − 1)/(N_e − 1)                       (the PAL annealing, sampling.anneal_alpha)
    2) p ← S_data^α;  p ← p / Σ p                          (S_data: the task's training-set size)
    3) p_b ← (p·n − 1)/(n − 3);  p_b ← clip(p_b);  p_b ← p_b / Σ p_b
    4) schedule ← [sst, para, sts] + random_choice(tasks, p_b, n − 3);  shuffle(schedule)
    5) loss[task] ← Σ of the task's batch losses in the schedule
    6) β ← 0.2 + 0.8·(e − 1)/(N_e − 1);  return loss[task] / S_data[task]^β

Why 3): a task drawn with p_b in the n − 3 free slots is seen 1 + (n − 3)·p_b times in expectation;
p_b = (p·n − 1)/(n − 3) makes that p·n, what the PAL schedule alone would give in n draws.

Readings chosen where Algorithm 1 is ambiguous (each a flag; the reasons in docs/methods.md, "Design notes"):
  - clip(p_b) clips to [0, 1] (`clip_high=1.0`); --grad_compromise_clip_high inf clips at 0 only.
  - S_data is the raw training-set size, as in line 2; --grad_compromise_normalize reads it as the
    proportion S / Σ S (the same update direction, a different scale).
  - n = 3 leaves no random slot (3 is skipped); n < 3 is rejected. N_e = 1: α = 1, β = 0.2.
Left out: the report's gradient accumulation over several "batches of batches" (use the training
script's --grad_accum) and its AMP details.
"""

import math

import numpy as np

from minbert.core import flags
from minbert.tasks.sampling import anneal_alpha


def sampling_correction(p: np.ndarray, n_batches: int, clip_high: float = 1.0) -> np.ndarray:
    """Step 3 of Alg. 1: p (K,) task probabilities -> p_b (K,), the probabilities of the
    n_batches − K random slots. Requires n_batches > K."""
    p = np.asarray(p, dtype=np.float64)                      # (K,)
    K = len(p)
    if n_batches <= K:
        raise ValueError(f"sampling_correction: n_batches must exceed the number of tasks ({K}), got {n_batches}")
    # 1) expected draws p·n, minus the fixed slot, spread over the n − K random slots
    p_b = (p * n_batches - 1) / (n_batches - K)
    # 2) clip to a probability: [0, 1] (or [0, ∞) with clip_high=inf)
    p_b = np.clip(p_b, 0.0, clip_high)
    # 3) renormalise (Σ p_b ≥ max p_b > 0: the biggest task has p ≥ 1/K, so p·n − 1 > 0)
    return p_b / p_b.sum()


class GradientCompromise:
    """Alg. 1 for one run: `tasks(epoch, rng)` draws one update's schedule, `scale(losses, epoch)`
    divides each task's summed loss by S_data^β. Uses the caller's numpy Generator, so a
    checkpointed generator (TaskSampler.rng) replays the same schedules after a resume."""

    def __init__(self, tasks, sizes, n_batches: int, num_epochs: int, clip_high: float = 1.0,
                 normalize: bool = False):
        self.task_names = list(tasks)
        self.sizes = np.asarray(sizes, dtype=np.float64)     # (K,) S_data
        K = len(self.task_names)
        if len(self.sizes) != K or (self.sizes <= 0).any():
            raise ValueError(f"GradientCompromise: need one positive size per task {self.task_names}, "
                             f"got {list(sizes)}")
        if n_batches < K:
            raise ValueError("GradientCompromise: n_batches must be at least the number of tasks "
                             f"({K}), got {n_batches}")
        self.n_batches, self.num_epochs, self.clip_high = n_batches, num_epochs, clip_high
        self.normalize = normalize

    def probs(self, epoch: int) -> np.ndarray:
        """p_b (K,) of the random slots in `epoch` (steps 1-3); None when n = K (no random slot)."""
        if self.n_batches == len(self.task_names):
            return None
        # 1) α;  2) p = S^α / Σ S^α
        alpha = anneal_alpha(epoch, self.num_epochs)
        p = self.sizes ** alpha
        p = p / p.sum()
        # 3) the sampling correction
        return sampling_correction(p, self.n_batches, self.clip_high)

    def beta(self, epoch: int) -> float:
        """β = 0.2 + 0.8·(e − 1)/(N_e − 1) = 1.2 − α: 0.2 in the first epoch, 1.0 in the last."""
        return 1.2 - anneal_alpha(epoch, self.num_epochs)

    def tasks(self, epoch: int, rng: np.random.Generator) -> list[str]:
        """Step 4: the n task names of one update, each task at least once, in shuffled order."""
        schedule = list(self.task_names)
        p_b = self.probs(epoch)
        if p_b is not None:
            draws = rng.choice(len(self.task_names), size=self.n_batches - len(self.task_names), p=p_b)
            schedule += [self.task_names[k] for k in draws]
        order = rng.permutation(len(schedule))
        return [schedule[i] for i in order]

    def scale(self, losses: dict, epoch: int) -> dict:
        """Step 6: {task: summed loss} -> {task: summed loss / S_data[task]^β}
        (S_data / Σ S_data with normalize=True)."""
        beta = self.beta(epoch)
        sizes = self.sizes / self.sizes.sum() if self.normalize else self.sizes
        size = dict(zip(self.task_names, sizes))
        return {t: loss / float(size[t] ** beta) for t, loss in losses.items()}


# ---------------------------------------------------------------------------------------------- flags
def clip_high_value(text: str) -> float:
    """type= for --grad_compromise_clip_high: a number > 0, or inf (clip at 0 only; flags.positive refuses inf)."""
    return math.inf if text == "inf" else flags.positive(text)


def add_args(parser) -> None:
    d = flags.defaults(GradientCompromise)
    g = parser.add_argument_group("Gradient Compromise (Pritsky et al., CS224N report, Alg. 1)")
    g.add_argument("--grad_compromise", type=flags.at_least(0), default=0,
                   help="N batches per GradVac update: each task once, the rest by the corrected PAL schedule "
                        "(0 = off)")
    g.add_argument("--grad_compromise_clip_high", type=clip_high_value, default=d["clip_high"],
                   help="upper clip of the corrected probabilities p_b (1: a probability; inf: clip at 0 only)")
    g.add_argument("--grad_compromise_normalize", action="store_true",
                   help="divide losses by (S/ΣS)^β instead of S^β (same direction; keeps gradients above AdamW's ε)")


def check_args(args, parser, num_tasks: int = 3) -> None:
    if args.grad_compromise and args.grad_compromise < num_tasks:
        parser.error(f"--grad_compromise must be at least the number of tasks ({num_tasks})")
    if args.grad_compromise and args.surgery != "none":
        parser.error("--grad_compromise already combines the task gradients with GradVac: drop --surgery")


def from_args(args, tasks, sizes) -> "GradientCompromise | None":
    if not args.grad_compromise:
        return None
    return GradientCompromise(tasks, sizes, args.grad_compromise, args.epochs, args.grad_compromise_clip_high,
                              args.grad_compromise_normalize)
