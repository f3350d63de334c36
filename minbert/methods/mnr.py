"""Multiple Negatives Ranking (MNR) loss: in-batch negatives for a bi-encoder.

Henderson et al. 2017, "Efficient Natural Language Response Suggestion for Smart Reply"
(arXiv:1705.00652); sentence-transformers' MultipleNegativesRankingLoss. For B positive
pairs (a_i, p_i), every other p_j in the batch serves as a negative for a_i:

    S_ij = scale · cos(a_i, p_j)                          (B, B)
    loss = mean_i [ −log softmax_j(S_ij) at j = i ]       = cross_entropy(S, arange(B))

Variant chosen:
  - One direction only (anchor -> positives), scale = 20 (temperature 0.05), as sentence-transformers.
    score="dot" is Benton's scoring (CS224N report, §4.2: D = M_x M_yᵀ), with scale 1.
  - Positives (`positive_pairs_mask`): Quora duplicates; STS pairs with similarity ≥ 4 (Benton).
  - How it joins training (`MNRObjective`, --mnr_schedule): add = task loss + weight · MNR on every
    bi-encoder batch (the default); first_half = Benton's schedule, MNR alone for epochs e ≤ E/2,
    then the task loss alone.
  - Which batches (--mnr_batches): positives = a positives-only stream per task (Benton §4.2: "a
    batch of K positively labelled sentence pairs"; the default); mixed = the positive rows of the
    task's own batch.
  - Duplicates: with texts (or token ids) the loss drops column j ≠ i from row i when p_j repeats
    p_i, a_i, another right answer to a_i, or an earlier column, so every row's loss depends only
    on the distinct texts of the batch (a batch repeated twice gives the batch's loss).
Left out: hard-negative columns, the symmetric variant (p -> a as well), and caching tricks for big
batches (GradCache). Gradient accumulation does *not* enlarge the pool of negatives. The reasons
for each choice: docs/methods.md, "Design notes".
"""

import torch
import torch.nn.functional as F

from minbert.core import flags
from minbert.core.errors import UserError

STS_POSITIVE_MIN = 4.0  # STS 4 = "mostly equivalent", 5 = "completely equivalent"


def positive_pairs_mask(task: str, labels: torch.Tensor) -> torch.Tensor:
    """(B,) labels -> (B,) bool: which pairs may be used as MNR positives.
    Quora ("para"): duplicates, label 1. STS ("sts"): similarity ≥ 4 of 5."""
    if task == "para":
        return labels == 1
    if task == "sts":
        return labels >= STS_POSITIVE_MIN
    raise ValueError(f"positive_pairs_mask: task must be 'para' or 'sts' (pair tasks), got {task!r}")


def token_keys(input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[tuple[int, ...]]:
    """(B, T) padded ids -> B hashable keys (the unpadded ids): equal keys = equal tokenized text."""
    return [tuple(ids[mask.bool()].tolist()) for ids, mask in zip(input_ids, attention_mask)]


def duplicate_mask(texts_a, texts_p) -> torch.Tensor:
    """B anchor and B positive texts -> (B, B) bool, True where column j is not a negative for
    row i (rules 1-4 in the module docstring). The diagonal is always False (kept)."""
    B = len(texts_p)
    mask = torch.zeros(B, B, dtype=torch.bool)
    for i in range(B):
        # texts that are correct answers for a_i: rules 1, 2 and 3 (k = i gives rule 1)
        right = {texts_a[i]} | {texts_p[k] for k in range(B) if texts_a[k] == texts_a[i]}
        seen = set()
        for j in range(B):
            if j != i and (texts_p[j] in right or texts_p[j] in seen):   # rule 4: `seen`
                mask[i, j] = True
            seen.add(texts_p[j])
    return mask


SCORES = ("cosine", "dot")
SCHEDULES = ("add", "first_half")
BATCHES = ("positives", "mixed")


class PositivePairs:
    """The positive pairs of one pair task's training TaskData (`positive_pairs_mask`), with the
    TaskData interface that BatchStream needs (len, batches). Batches are TaskData's own collated
    batches of positive rows; with shuffle, a random permutation cut into chunks of 50 batches,
    each sorted by length (less padding), in shuffled order, as TaskData.batches."""

    def __init__(self, data, task: str):
        if data.labels is None or data.pair_mode != "separate":
            raise ValueError("PositivePairs: needs labeled pair data encoded separately (a bi-encoder head)")
        self.data, self.task = data, task
        self.index = positive_pairs_mask(task, data.labels).nonzero().flatten().tolist()

    def __len__(self) -> int:
        return len(self.index)

    def batches(self, batch_size: int, shuffle: bool, generator: torch.Generator | None = None):
        n, length = len(self.index), self.data.lengths.__getitem__
        order = torch.randperm(n, generator=generator).tolist() if shuffle else list(range(n))
        rows = [self.index[i] for i in order]
        groups = []
        for c in range(0, n, 50 * batch_size):
            part = sorted(rows[c:c + 50 * batch_size], key=length)
            groups += [part[s:s + batch_size] for s in range(0, len(part), batch_size)]
        if shuffle:
            groups = [groups[g] for g in torch.randperm(len(groups), generator=generator).tolist()]
        return (self.data._collate(g) for g in groups)


def mnr_scores(a: torch.Tensor, p: torch.Tensor, scale: float = 20.0, texts_a=None, texts_p=None,
               score: str = "cosine") -> torch.Tensor:
    """(B, C) anchors, (B, C) positives -> (B, B) logits S_ij = scale · cos(a_i, p_j) (score="dot":
    scale · a_i · p_j), with −inf where `duplicate_mask` drops a column (only if texts are given)."""
    if a.shape != p.shape or a.dim() != 2:
        raise ValueError(f"mnr_scores: expected a, p of equal shape (B, C), got {tuple(a.shape)} and {tuple(p.shape)}")
    if (texts_a is None) != (texts_p is None):
        raise ValueError("mnr_scores: pass both texts_a and texts_p, or neither")
    if score not in SCORES:
        raise ValueError(f"mnr_scores: score must be one of {SCORES}, got {score!r}")
    a, p = a.float(), p.float()                                            # fp32 even under autocast
    if score == "cosine":
        # unit vectors: then a dot product is a cosine
        a, p = F.normalize(a, dim=-1), F.normalize(p, dim=-1)              # (B, C)
    S = scale * (a @ p.T)                                                  # (B, C) @ (C, B) -> (B, B)
    if texts_a is not None:
        S = S.masked_fill(duplicate_mask(texts_a, texts_p).to(S.device), float("-inf"))
    return S


def mnr_loss(a: torch.Tensor, p: torch.Tensor, scale: float = 20.0, texts_a=None, texts_p=None,
             score: str = "cosine") -> torch.Tensor:
    """Scalar MNR loss: cross-entropy of each row of `mnr_scores` against its diagonal."""
    S = mnr_scores(a, p, scale, texts_a, texts_p, score)                   # (B, B)
    return F.cross_entropy(S, torch.arange(S.shape[0], device=S.device))


class MNRObjective:
    """MNR in training: `loss(task, u, v, batch, task_loss)` returns the loss to back-propagate for
    one bi-encoder batch (see the module docstring for the two schedules); call `set_epoch(e)`
    (1-indexed) at the start of each epoch. scale=None: 20 for cosine, 1 for dot scores."""

    def __init__(self, weight: float = 1.0, score: str = "cosine", scale: float | None = None,
                 schedule: str = "add", num_epochs: int = 1, batches: str = "mixed"):
        if score not in SCORES or schedule not in SCHEDULES or batches not in BATCHES:
            raise ValueError(f"MNRObjective: score must be one of {SCORES}, schedule one of "
                             f"{SCHEDULES} and batches one "
                             f"of {BATCHES}, got {score!r}, {schedule!r}, {batches!r}")
        self.weight, self.score, self.schedule, self.num_epochs = weight, score, schedule, num_epochs
        self.scale = scale if scale is not None else (20.0 if score == "cosine" else 1.0)
        self.batches, self.streams = batches, {}
        self.epoch = 1

    def attach(self, train: dict, make_stream, seed: int) -> None:
        """batches="positives": one positives-only stream per bi-encoder pair task of `train` ({task: TaskData});
        make_stream(data, seed) -> a BatchStream (the script's distributed.stream at its batch size)."""
        if self.batches != "positives":
            return
        for k, (task, data) in enumerate(sorted(train.items())):
            if task in ("para", "sts") and data.pair_mode == "separate":
                positives = PositivePairs(data, task)
                if len(positives) < 2:
                    raise UserError(f"--mnr: the {task} training set has {len(positives)} positive pairs; MNR needs "
                                    "at least 2 (or use --mnr_batches mixed)")
                self.streams[task] = make_stream(positives, seed + 7919 * (k + 1))

    def state_dict(self) -> dict:
        return {task: s.state_dict() for task, s in self.streams.items()}

    def load_state_dict(self, state: dict) -> None:
        for task, st in state.items():
            self.streams[task].load_state_dict(st)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    @property
    def mnr_epoch(self) -> bool:
        """first_half: MNR in epochs e ≤ E/2; add: every epoch."""
        return self.schedule == "add" or self.epoch <= self.num_epochs // 2

    def mnr_batch(self, task: str, batch: dict) -> dict:
        """The batch the MNR loss is computed on: the next positives-only batch, or `batch` itself (mixed)."""
        return self.streams[task].next() if task in self.streams else batch

    def batch_mnr(self, task: str, u: torch.Tensor, v: torch.Tensor, batch: dict) -> torch.Tensor | None:
        """MNR over the batch's positive pairs (duplicate texts masked); None with < 2 positives."""
        pos = positive_pairs_mask(task, batch["labels"].to(u.device))      # (B,)
        if pos.sum() < 2:
            return None
        ids_a, mask_a, ids_b, mask_b = (batch[k][pos.to(batch[k].device)] for k in
                                        ("input_ids", "attention_mask", "input_ids_b", "attention_mask_b"))
        return mnr_loss(u[pos], v[pos], self.scale, token_keys(ids_a, mask_a), token_keys(ids_b, mask_b), self.score)

    def loss(self, task: str, u: torch.Tensor, v: torch.Tensor, batch: dict, task_loss: torch.Tensor,
             features=None) -> torch.Tensor:
        """add: task_loss + weight·MNR. first_half: weight·MNR in the MNR epochs, else task_loss.
        With positives-only batches, features(batch) -> (u, v) embeds the positives batch."""
        if not self.mnr_epoch:
            return task_loss
        if task in self.streams:
            if features is None:
                raise ValueError("MNRObjective.loss: positives-only batches need features=")
            batch = self.mnr_batch(task, batch)
            u, v = features(batch)
        mnr = self.batch_mnr(task, u, v, batch)
        if self.schedule == "add":
            return task_loss if mnr is None else task_loss + self.weight * mnr
        return 0.0 * task_loss if mnr is None else self.weight * mnr


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    g = parser.add_argument_group("multiple-negatives ranking loss (Henderson et al. 2017; Benton, CS224N report)")
    g.add_argument("--mnr", type=flags.at_least(0.0, float), default=0.0,
                   help="weight of the MNR loss on bi-encoder pair tasks (0 = off)")
    g.add_argument("--mnr_score", choices=SCORES, default="cosine",
                   help="cosine (sentence-transformers) or dot (Benton, Henderson et al.)")
    g.add_argument("--mnr_scale", type=flags.positive, default=None,
                   help="multiplies the scores; default 20 for cosine, 1 for dot")
    g.add_argument("--mnr_schedule", choices=SCHEDULES, default="add",
                   help="add: task loss + mnr·MNR always; first_half: MNR alone for epochs <= E/2, then the task loss "
                        "(Benton)")
    g.add_argument("--mnr_batches", choices=BATCHES, default="positives",
                   help="positives: MNR sees batches of positive pairs only (Benton); mixed: the positive rows of each "
                        "task batch")


def check_args(args, parser) -> None:
    if args.mnr and {args.para_head, args.sts_head} <= {"cross", "cross_tanh"}:
        parser.error("--mnr needs a bi-encoder pair head: --para_head or --sts_head cosine|dot|concat|siamese")


def from_args(args, train: dict, make_stream) -> "MNRObjective | None":
    """The MNR objective with its positives-only streams (make_stream(data, seed): the script's batch stream),
    or None when --mnr is 0."""
    if not args.mnr:
        return None
    objective = MNRObjective(args.mnr, args.mnr_score, args.mnr_scale, args.mnr_schedule, args.epochs, args.mnr_batches)
    objective.attach(train, make_stream, args.seed)
    return objective
