"""minbert.bert.dropout.dropout at its edges: p = 1, and the mask as its docstring specifies it.

Each test here was written for a mutant that survived tests/bert/test_dropout.py (bench/mutation.py,
bench/results/mutation.md names them).
Oracles: (b) torch's F.dropout for p = 1 (everything dropped, gradient 0); (a) the documented rule
of the 16-bit mask, rebuilt from torch's RNG: ceil(N/4) int64 draws over the full 64-bit range,
viewed as N int16 lanes, keep iff lane ≥ −32768 + k with k = round(p·65536).
Run: python -m pytest -q tests/bert/test_dropout_edges.py   (offline, CPU, ~1 s)
"""

import torch
import torch.nn.functional as F

from minbert.bert import dropout as D


def test_p_one_drops_everything_like_torch():
    x = torch.randn(4, 5, requires_grad=True)
    y = D.dropout(x, 1.0, training=True)
    torch.testing.assert_close(y, F.dropout(x, 1.0, training=True),
                               msg=lambda m: f"minbert.bert.dropout.dropout(x, p=1): torch gives zeros: {m}")
    y.sum().backward()
    torch.testing.assert_close(x.grad, torch.zeros(4, 5), msg=lambda m: f"dropout(p=1): the gradient is 0: {m}")


def test_mask_follows_the_documented_16_bit_rule_call_after_call():
    """Two calls in a row on N = 1000 values (a multiple of 4): each mask is the documented one, so
    each call draws exactly ceil(N/4) int64s and the second call's bits follow the first's."""
    n, p = 1000, 0.3
    k = round(p * D.LEVELS)
    torch.manual_seed(0)
    got = [D.dropout(torch.ones(n), p) != 0 for _ in range(2)]
    torch.manual_seed(0)
    for call in range(2):
        bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(1 << 63), None)
        lanes = bits.view(torch.int16)[:n].int()
        want = lanes >= k - 32768
        assert torch.equal(got[call], want), (f"minbert.bert.dropout.dropout, call {call + 1}: the keep mask differs from "
                                              f"'keep iff lane >= -32768 + k' on ceil(N/4) int64 draws "
                                              f"({int((got[call] != want).sum())} of {n} lanes)")


def test_set_fast_mask_switches_which_kernel_runs(monkeypatch):
    """set_fast_mask(True) must make dropout take the fast kernel (_ScaledMask), False the readable
    one (_MaskedScale): the fast path's equality test passes either way, so this checks the switch."""
    calls = []
    monkeypatch.setattr(D._ScaledMask, "apply", staticmethod(lambda x, mask, scale: calls.append("fast") or x))
    monkeypatch.setattr(D._MaskedScale, "apply", staticmethod(lambda x, mask, scale: calls.append("readable") or x))
    try:
        D.set_fast_mask(True)
        D.dropout(torch.ones(8), 0.5)
        D.set_fast_mask(False)
        D.dropout(torch.ones(8), 0.5)
    finally:
        D.set_fast_mask(False)
    assert calls == ["fast", "readable"], f"minbert.bert.dropout.set_fast_mask: kernels used {calls}, expected ['fast', 'readable']"
