"""Dropout (Srivastava et al. 2014, JMLR 15, "Dropout: A Simple Way to Prevent Neural Networks
from Overfitting"), inverted form: in training each element is kept with probability 1 − p and
scaled by 1/(1 − p), so the expected output equals the input and evaluation needs no rescaling.

    y = x · m / (1 − p),   m ~ Bernoulli(1 − p) elementwise;   dy/dx = m / (1 − p)

Why not just `F.dropout` everywhere: on CPU, torch draws the mask with `bernoulli_`, one
random double per element, and that alone was ~24% of a BERT train step here. We draw the
same mask from 16 random bits per element instead (one 64-bit draw gives four 16-bit lanes,
each uniform on [−32768, 32767]; keep when lane ≥ threshold), ~6× cheaper. The only
difference: p is rounded to a multiple of 1/65536 (0.1 → 0.100006), and the 1/(1 − p) scale
uses that rounded p, so the expectation is still exact. On CUDA/MPS, `F.dropout` is already a
fused kernel and is used as is. tests/bert/test_dropout.py checks the keep rate, the scaling, the
gradient and the seeding.

Fast path (`--fast_paths` turns it on through `set_fast_mask`, minbert/run/fast_paths.py):
`where(keep, x·s, 0)` reads a bool mask with a kernel that is not well vectorised on CPU, and the
product x·s is one more pass and one more tensor. The fast path turns the same mask into 0/1 in x's
dtype once and applies it with one fused addcmul each way, 0 + s·x·m, rounded once, like x·s
(the same numbers bit for bit, and the same random draws). Measured on the 2-core EPYC, 1 thread:
dropout forward + backward on a (B, T, C) bf16 tensor 1.3x (MiniLM) to 1.4x (bert-base) cheaper.
The price: the mask saved for backward takes x's element size (2 bytes in bf16, 4 in fp32), not 1.
"""

import torch
import torch.nn.functional as F
from torch import nn

LEVELS = 1 << 16   # 16-bit lanes: p has a resolution of 1/65536
_fast_mask = False   # set_fast_mask(True): the fast path below; off by default (the readable path)


def set_fast_mask(on: bool) -> None:
    """Choose the fast path (0/1 mask in x's dtype, one addcmul) or the readable where(). Process-wide."""
    global _fast_mask
    _fast_mask = bool(on)


class _MaskedScale(torch.autograd.Function):
    """y = where(keep, x·s, 0); saves only the boolean mask for backward (1 byte/element)."""

    @staticmethod
    def forward(ctx, x, keep, scale):
        ctx.save_for_backward(keep)
        ctx.scale = scale
        return torch.where(keep, x * scale, 0)

    @staticmethod
    def backward(ctx, grad):
        (keep,) = ctx.saved_tensors
        return torch.where(keep, grad * ctx.scale, 0), None, None


class _ScaledMask(torch.autograd.Function):
    """Fast path: y = 0 + s·x·m with m the keep mask as 0/1 in x's dtype; saves m for backward."""

    @staticmethod
    def forward(ctx, x, mask, scale):
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return torch.addcmul(x.new_zeros(()), x, mask, value=scale)

    @staticmethod
    def backward(ctx, grad):
        (mask,) = ctx.saved_tensors
        return torch.addcmul(grad.new_zeros(()), grad, mask, value=ctx.scale), None, None


def dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    if not training or p == 0.0:
        return x
    if x.device.type != "cpu" or not 0.0 < p < 1.0:
        return F.dropout(x, p, training=True)
    drop_levels = round(p * LEVELS)                  # p rounded to k/65536
    # 1) random bits: ceil(N/4) int64 draws over the full 64-bit range -> N int16 lanes.
    bits = torch.empty((x.numel() + 3) // 4, dtype=torch.int64, device=x.device)
    lanes = bits.random_(-(1 << 63), None).view(torch.int16)[: x.numel()].view(x.shape)
    # 2) keep iff lane >= -32768 + k: exactly LEVELS - k of the 65536 equally likely values.
    keep = lanes >= (drop_levels - LEVELS // 2)
    # 3) inverted scaling by the probability actually used, so E[y] = x exactly.
    if _fast_mask:
        return _ScaledMask.apply(x, keep.to(x.dtype), LEVELS / (LEVELS - drop_levels))
    return _MaskedScale.apply(x, keep, LEVELS / (LEVELS - drop_levels))


class Dropout(nn.Module):
    """Drop-in for nn.Dropout using `dropout` above."""

    def __init__(self, p: float):
        super().__init__()
        self.p = p

    def forward(self, x):
        return dropout(x, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}"
