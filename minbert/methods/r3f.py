"""R3F and R4F: noise-consistency fine-tuning that reduces representational collapse.

Aghajanyan et al. 2020, "Better Fine-Tuning by Reducing Representational Collapse",
arXiv:2008.03156 (ICLR 2021), the R3F/R4F objectives of its method section. With f the pre-trained network
and g the task head:

    L_R3F = L(θ) + λ·KL_S(g·f(x) ‖ g·f(x + z)),    z ~ U(−ε, ε) or N(0, ε²I)
    R4F   = R3F with g spectrally normalised (Lipschitz-1 head, `spectral_norm_heads`)

KL_S is the symmetric KL (`minbert.methods.smart.divergence`, shared with SMART; Bernoulli for the
one-logit paraphrase head). Unlike SMART there is no gradient step on the noise: one extra forward.

Variant chosen: the authors' fairseq code (examples/rxf, sentence_prediction_r3f.py).
  - z goes on the RAW word embeddings (B, T, C), detached, before positions and LayerNorm: the
    embedding table gets no gradient from the noisy branch; everything after the lookup does.
  - Neither side of KL_S is detached. Regression ('sts') gets no R3F term (fairseq: classification only).
  - The noisy pass runs in the model's mode (train: its own dropout masks). KL in fp32.
  - R4F: `spectral_norm` on each head's FINAL Linear only, as fairseq's
    --spectral-norm-classification-head; by default every head (`tasks` narrows it).
Left out: fairseq's sum-then-divide-by-sample-size bookkeeping (the batch mean is the same number
per example), noise on position/type embeddings, and an R3F term for regression.
"""

import torch
from torch import nn
from torch.nn.utils.parametrizations import spectral_norm
from torch.nn.utils.parametrize import is_parametrized

from minbert.core import flags
from minbert.methods.smart import divergence
from minbert.tasks.multitask import TASKS


class R3F:
    """λ·KL_S(clean, noisy) for MultitaskBert. Use (inside the autocast context):
    `loss = task_loss(task, out, labels) + r3f.loss(task, batch, out)`."""

    def __init__(self, model, lambda_=1.0, epsilon=1e-5, noise="uniform"):
        if noise not in ("uniform", "normal"):
            raise ValueError(f"minbert.methods.r3f.R3F: noise must be 'uniform' or 'normal', got {noise!r}")
        self.model, self.lambda_, self.epsilon, self.noise = model, lambda_, epsilon, noise

    def loss(self, task: str, batch: dict, clean_out: torch.Tensor) -> torch.Tensor:
        """λ·symmetric KL(clean, noisy); a zero tensor for 'sts' (regression gets no R3F term)."""
        if task == "sts" or self.lambda_ == 0:
            return torch.zeros((), device=clean_out.device)
        # 1) the raw word embeddings, outside autograd: the table gets no gradient from here (B, T, C)
        with torch.no_grad():
            words = self.model.encoder.embeddings.word_embedding(batch["input_ids"])
        # 2) z ~ U(−ε, ε) or N(0, ε²I), one draw per entry                                  (B, T, C)
        if self.noise == "uniform":
            z = torch.empty_like(words).uniform_(-self.epsilon, self.epsilon)
        else:
            z = torch.randn_like(words) * self.epsilon
        # 3) the noisy pass: positions, LayerNorm, encoder and head are added on top of words + z
        noisy_out = self.model(task, batch, word_embeds=words + z)
        # 4) λ·KL_S, fp32, gradient into both the clean and the noisy outputs
        return self.lambda_ * divergence(task, clean_out, noisy_out)


def spectral_norm_heads(model, tasks=TASKS) -> None:
    """R4F: spectral-normalise the FINAL Linear of each head in `tasks`, in place.

    Call it before building the optimizer and before loading an R4F checkpoint: the weight
    becomes `heads.<task>.<i>.parametrizations.weight.original` plus u, v buffers."""
    for task in tasks:
        linears = [m for m in model.heads[task].modules() if isinstance(m, nn.Linear)]   # registration order
        if not linears:
            raise ValueError(f"minbert.methods.r3f.spectral_norm_heads: the {task} head has no Linear layer "
                             "(a parameter-free cosine head?); leave it out of `tasks`")
        if not is_parametrized(linears[-1], "weight"):   # twice would normalise twice; once is enough
            spectral_norm(linears[-1])


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    d = flags.defaults(R3F)
    g = parser.add_argument_group("R3F / R4F (Aghajanyan et al. 2020, arXiv:2008.03156)")
    g.add_argument("--r3f", type=flags.at_least(0.0, float), default=0.0,
                   help=f"weight λ of the noise-consistency KL (paper: {d['lambda_']:g}; 0 = off); no term for STS")
    g.add_argument("--r3f_epsilon", type=flags.positive, default=d["epsilon"], help="noise size ε")
    g.add_argument("--r3f_noise", choices=["uniform", "normal"], default=d["noise"],
                   help="U(−ε, ε) (fairseq's default) or N(0, ε²)")
    g.add_argument("--r4f", action="store_true",
                   help="R4F: R3F (needs --r3f λ) plus spectral norm on each head's final linear layer")


def check_args(args, parser) -> None:
    if args.r4f and not args.r3f:
        parser.error("--r4f is R3F plus spectral norm on the heads: give R3F's weight too, e.g. --r3f 1 --r4f")
    if (args.r3f or args.r4f) and not {args.para_head, args.sts_head} <= {"cross", "cross_tanh"}:
        parser.error("--r3f/--r4f perturb one input sequence, so they need cross-encoder pair heads")


def from_args(args, model):
    """R3F for `model` (R4F: its heads spectrally normalised first), or None when off."""
    if args.r4f:
        spectral_norm_heads(model)
    if not args.r3f:
        return None
    return R3F(model, lambda_=args.r3f, epsilon=args.r3f_epsilon, noise=args.r3f_noise)
