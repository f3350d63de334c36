"""Projected attention layers (PALs): small task-specific attention beside every BERT layer.

Stickland & Murray 2019, "BERT and PALs: Projected Attention Layers for Efficient Adaptation in
Multi-Task Learning", arXiv:1902.02671, §3 (reference code: Bert-n-Pals `modeling.py`). For task t,
beside layer l (input h = h^{l-1}):

    TS(h)  = GELU( V_D · g_l( V_E · h ) )             V_E: C -> S,  V_D: S -> C  (with biases)
    g_l(s) = concat_heads softmax(Q Kᵀ/√d + M) V      Q, K, V = Linear(S, S)(s), d = S / heads
    h^l    = LN2( a + Dropout(FFN(a)) + TS(h^{l-1}) ) a = LN1(h + Attn(h)): BERT's own layer

A PAL reads the layer's input and joins the second residual, inside the final LayerNorm, with no
dropout of its own; g is BERT's SelfAttention (attention.py) at width S, without output projection.
Sharing: ONE V_E and ONE V_D per task, used by every layer; Q/K/V per layer AND per task; nothing
shared between tasks. Shapes: B batch, T tokens, C hidden, S = size (d_s in the paper), H heads.

Variant chosen:
  - GELU after V_D, as the reference code (which produced the paper's numbers); the paper's text
    has none. GELU(0) = 0, so a zero V_D gives TS = 0, and GELU'(0) = 1/2, so it still learns.
  - heads = 12 (d = 204/12 = 17), BERT's own count; the released code uses 6 (pass heads=6).
  - init N(0, initializer_range), biases 0, as the reference. zero_init=True zeroes V_D instead, so
    the model starts EXACTLY at pretrained BERT (in eval mode).
  - PALs after fine-tuning (Pritsky, Somerville & Huynh, CS224N report §3.3.2): zero-init PALs on a
    fine-tuned model, everything else frozen (`freeze_for_pals_after`; train_multitask.py --pals_after).
Left out: the reference's other adapters (low-rank, Houlsby, LHUC, the "top" PAL stack), per-task
poolers, PALs in only some layers. Parameter counts, frozen training, and the measured details of
each choice: docs/methods.md, "Design notes".
"""

from dataclasses import replace

import torch
import torch.nn.functional as F
from torch import nn

from minbert.core import flags
from minbert.bert.attention import SelfAttention
from minbert.bert.config import BertConfig
from minbert.core.errors import UserError


def num_parameters_formula(C: int, L: int, S: int, num_tasks: int) -> int:
    """Trainable parameters of PALs(config with hidden C and L layers, tasks, size=S), per task:
        2·C·S + (S + C) + L·3·(S² + S)      (bert-base, S = 204: 1,819,836; MiniLM-L6: 910,020)"""
    shared = C * S + S + S * C + C          # V_E (C -> S) and V_D (S -> C), weights + biases
    per_layer = 3 * (S * S + S)             # Q, K, V: Linear(S, S) each, weights + biases
    return num_tasks * (shared + L * per_layer)


class PALs(nn.Module):
    def __init__(self, config: BertConfig, tasks: list[str], size: int = 204, heads: int = 12,
                 zero_init: bool = False):
        super().__init__()
        if size % heads:
            raise ValueError(f"minbert.methods.pals.PALs: size {size} is not divisible by heads {heads} "
                             f"(e.g. 204 = 12 x 17 = 6 x 34)")
        C, L, S = config.hidden_size, config.num_hidden_layers, size
        self.hidden_size, self.num_layers, self.size = C, L, S
        # g is BERT's own attention at width S: the config copy changes only the width and the
        # head count, so dropout, the mask convention and fast_attention match the encoder's.
        pal_config = replace(config, hidden_size=S, num_attention_heads=heads)
        # Parameter names: V_E.<task>, V_D.<task>, attention.<task>.<layer>.{query,key,value}.
        self.V_E = nn.ModuleDict({t: nn.Linear(C, S) for t in tasks})    # one per task, all layers
        self.V_D = nn.ModuleDict({t: nn.Linear(S, C) for t in tasks})    # one per task, all layers
        self.attention = nn.ModuleDict(
            {t: nn.ModuleList(SelfAttention(pal_config) for _ in range(L)) for t in tasks})
        self.reset_parameters(config.initializer_range, zero_init)

    @torch.no_grad()
    def reset_parameters(self, std: float = 0.02, zero_init: bool = False):
        # The reference's init: N(0, std) weights, zero biases (BERT's _init_weights).
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, mean=0.0, std=std)
                nn.init.zeros_(m.bias)
        if zero_init:
            # TS(h) = GELU(0·s + 0) = 0: every layer output equals pretrained BERT's, bit for bit.
            for V_D in self.V_D.values():
                nn.init.zeros_(V_D.weight)
                nn.init.zeros_(V_D.bias)

    @property
    def tasks(self) -> list[str]:
        return list(self.V_E)

    def layer(self, task: str, layer_index: int) -> tuple[nn.Linear, SelfAttention, nn.Linear]:
        """(V_E, g, V_D) that TS(h) uses at this layer for this task. V_E and V_D are the same
        objects for every layer_index; g is the layer's own."""
        if task not in self.V_E:
            raise KeyError(f"minbert.methods.pals.PALs: unknown task {task!r}; built for {self.tasks}")
        if not 0 <= layer_index < self.num_layers:
            raise IndexError(f"minbert.methods.pals.PALs: layer_index {layer_index} outside "
                             f"[0, {self.num_layers}) (the encoder has {self.num_layers} layers)")
        return self.V_E[task], self.attention[task][layer_index], self.V_D[task]

    def forward(self, task: str, layer_index: int, h: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """TS(h) of `task` beside layer `layer_index`. h: the layer's INPUT (B, T, C);
        mask: additive (B, 1, 1, T) as the layer gets it. Returns (B, T, C)."""
        if h.dim() != 3 or h.shape[-1] != self.hidden_size:
            raise ValueError(f"minbert.methods.pals.PALs.forward: expected h (B, T, C) with C = "
                             f"{self.hidden_size}, got {tuple(h.shape)}")
        V_E, g, V_D = self.layer(task, layer_index)
        # Hint: TS(h) = GELU(V_D(g(V_E(h), mask))): project down to S, attend with this layer's g and the
        # same mask, project back up to C, GELU (module docstring).
        ### BEGIN SOLUTION pals
        s = V_E(h)                      # (B, T, C) @ (C, S) -> (B, T, S): project down
        s = g(s, mask)                  # (B, T, S): H heads of width S/H attend, same padding mask
        return F.gelu(V_D(s))           # (B, T, S) @ (S, C) -> (B, T, C): project up, GELU (ref. code)
        ### END SOLUTION


def freeze_for_pals_after(model, train_heads: bool = False) -> None:
    """PALs after fine-tuning: everything but the PALs (and the heads if train_heads) stops
    training. `model` is a MultitaskBert whose PALs were just added with zero_init=True."""
    if model.pals is None:
        raise ValueError("minbert.methods.pals.freeze_for_pals_after: the model has no PALs; build it with "
                         "pals=PALs(..., zero_init=True)")
    if any(V_D.weight.any() or V_D.bias.any() for V_D in model.pals.V_D.values()):
        raise UserError("minbert.methods.pals.freeze_for_pals_after: V_D is not zero, so the PALs would change the "
                         "fine-tuned model's outputs at step 0; build them with zero_init=True (--pals_init zero)")
    model.requires_grad_(False)
    model.pals.requires_grad_(True)
    model.heads.requires_grad_(train_heads)


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    d = flags.defaults(PALs)
    g = parser.add_argument_group("PALs (Stickland & Murray 2019, arXiv:1902.02671)")
    g.add_argument("--pals", action="store_true", help="projected attention layers, one set per task, in every layer")
    g.add_argument("--pals_size", type=flags.at_least(1), default=d["size"],
                   help="PAL width d_s (paper: 204, ~1.13x BERT-base params for 8 tasks; Pritsky et al.: 132)")
    g.add_argument("--pals_heads", type=flags.at_least(1), default=d["heads"],
                   help="attention heads inside a PAL (paper text 12; reference code 6); must divide --pals_size")
    g.add_argument("--pals_init", choices=["random", "zero"], default="zero" if d["zero_init"] else "random",
                   help="zero: V_D starts at 0, so training starts at plain BERT")


def check_args(args, parser) -> None:
    if args.pals and args.pals_size % args.pals_heads:
        parser.error(f"--pals_size {args.pals_size} must be divisible by --pals_heads {args.pals_heads}")


def from_args(args, config: BertConfig, tasks) -> PALs | None:
    if not args.pals:
        return None
    return PALs(config, tasks, args.pals_size, args.pals_heads, zero_init=args.pals_init == "zero")
