"""Each fast path (minbert/run/fast_paths.py) computes what its readable path computes.
Fused AdamW within a stated tolerance; keep_memory and the dropout mask bit for bit.

Oracles: (b) live — the readable path: parameters of a tiny BERT after 3 train steps with the fast
path on equal those with it off, within a stated tolerance, in fp32 and in bf16 autocast; with the
fast paths off the step is torch.optim.AdamW(foreach=True)'s, bit for bit (the readable AdamW's
own oracle, tests/test_adamw.py). (c) properties — keep_memory asks glibc for the settings that keep freed
blocks (a stand-in libc records the mallopt calls; what RSS then does is measured by bench/keep_memory_rss.py,
not asserted), and --fast_paths rejects unknown names at parse time. The resume tests of train_multitask.py run
with the default --fast_paths auto, and test_train_multitask.py repeats the basic one with off.
"""

import argparse
import copy
import platform

import pytest
import torch

from minbert.adamw import AdamW, param_groups
from minbert.core import device
from minbert.run import fast_paths
from minbert.bert.config import BertConfig
from minbert.bert.dropout import dropout, set_fast_mask
from minbert.bert.model import BertModel
from minbert.core.device import keep_freed_memory

# The fused kernel rounds p·(1 − lr·λ) − step·m/denom in another order than the foreach passes (a
# few float32 ulps in m, v and p). Adam divides by sqrt(v), so on a coordinate whose gradient is
# tiny a few ulps in m or v become a visible part of its step, up to lr. So the bound is a fraction
# of lr = 1e-3: 1% in fp32 (seen: 2e-6), 10% in bf16, where an ulp can also flip the bf16 rounding
# of an activation in the next forward (seen: 2.2e-5). A wrong equation moves parameters by ~lr.
TOLERANCE = {"fp32": dict(atol=1e-5, rtol=0), "bf16": dict(atol=1e-4, rtol=0)}


def tiny_model():
    torch.manual_seed(0)
    return BertModel(BertConfig.tiny())   # 2 layers, hidden 32; dropout 0.1 stays on


def batches(n=3, B=4, T=12):
    g = torch.Generator().manual_seed(1)
    return [torch.randint(5, 1000, (B, T), generator=g) for _ in range(n)]


def train(model, opt, precision):
    """3 steps; dropout masks are seeded per step, so both runs draw the same ones."""
    for i, ids in enumerate(batches()):
        torch.manual_seed(100 + i)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=precision == "bf16"):
            out = model(ids, torch.ones_like(ids))
            loss = out["last_hidden_state"].float().pow(2).mean() + out["pooler_output"].float().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return [p.detach().clone() for p in model.parameters()]


def run(precision, fused=False, dropout_mask=False):
    model = tiny_model()
    set_fast_mask(dropout_mask)
    try:
        return train(model, AdamW(param_groups(model, 0.01), lr=1e-3, fused=fused), precision)
    finally:
        set_fast_mask(False)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_fused_adamw_matches_the_readable_equations_after_3_steps(precision):
    readable, fused = run(precision, fused=False), run(precision, fused=True)
    moved = max((a - b).abs().max().item() for a, b in zip(readable, tiny_model().parameters()))
    assert moved > 1e-3, "the 3 steps did not move the parameters: the comparison would be vacuous"
    for i, (want, got) in enumerate(zip(readable, fused)):
        torch.testing.assert_close(got, want, **TOLERANCE[precision], msg=lambda m: (
            f"minbert.adamw.fused_step ({precision}): parameter {i} after 3 steps differs from the readable "
            f"AdamW.step (steps 1-6 of minbert/adamw.py) by more than {TOLERANCE[precision]}:\n{m}"))


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_fast_paths_off_is_torch_adamw_bit_for_bit_and_never_calls_the_fused_kernel(precision, monkeypatch):
    args = argparse.Namespace(fast_paths="off")
    fast = fast_paths.from_args(args, torch.device("cpu"))
    assert not (fast.fused_adamw or fast.keep_memory or fast.dropout_mask), f"--fast_paths off turned on: {fast}"

    def forbidden(*a, **k):
        raise AssertionError("--fast_paths off called torch._fused_adamw_")
    monkeypatch.setattr(torch, "_fused_adamw_", forbidden)
    ours = run(precision, fused=fast.fused_adamw, dropout_mask=fast.dropout_mask)
    model = tiny_model()
    want = train(model, torch.optim.AdamW(param_groups(model, 0.01), lr=1e-3, foreach=True), precision)
    for i, (a, b) in enumerate(zip(ours, want)):
        assert torch.equal(a, b), (f"--fast_paths off ({precision}): parameter {i} after 3 steps is not bit-identical "
                                   "to torch.optim.AdamW(foreach=True), the readable path's reference")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_dropout_mask_fast_path_is_the_readable_dropout_bit_for_bit(precision):
    """Same seed, same mask: outputs and input gradients identical, and 3 train steps too."""
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    x = torch.randn(4, 8, 33).to(dtype)   # an odd size: the last int64 draw is only partly used
    outs = {}
    for fast in (False, True):
        set_fast_mask(fast)
        try:
            torch.manual_seed(5)
            xi = x.clone().requires_grad_()
            y = dropout(xi, 0.1)
            (y.float() * torch.arange(y.numel()).view(y.shape)).sum().backward()
            outs[fast] = (y.detach(), xi.grad)
        finally:
            set_fast_mask(False)
    assert (outs[False][0] == 0).any() and (outs[False][0] != 0).any(), "the mask dropped nothing or everything"
    assert torch.equal(outs[True][0], outs[False][0]), f"minbert.bert.dropout fast mask ({precision}): output differs"
    assert torch.equal(outs[True][1], outs[False][1]), f"minbert.bert.dropout fast mask ({precision}): gradient differs"
    want, got = run(precision), run(precision, dropout_mask=True)
    assert all(torch.equal(a, b) for a, b in zip(got, want)), \
        f"dropout_mask ({precision}): parameters after 3 steps differ from the readable dropout's"


def test_fused_adamw_state_dict_is_the_readable_one_and_continues_exactly():
    """Counts stay Python floats, so checkpoints are the same either way and a resumed fused run
    (or a readable one resumed fused) continues from the same state."""
    model = tiny_model()
    opt = AdamW(param_groups(model, 0.01), lr=1e-3, fused=True)
    train(model, opt, "fp32")
    state = opt.state_dict()["state"]
    assert all(type(s["step"]) is float and s["step"] == 3.0 for s in state.values()), \
        "minbert.adamw.fused_step must keep state['step'] a Python float, counted like the readable path"
    clone = copy.deepcopy(model)
    again = AdamW(param_groups(clone, 0.01), lr=1e-3, fused=True)
    again.load_state_dict(copy.deepcopy(opt.state_dict()))
    a, b = train(model, opt, "fp32"), train(clone, again, "fp32")
    assert all(torch.equal(x, y) for x, y in zip(a, b)), "fused AdamW after load_state_dict diverged from the original"


def test_fused_adamw_falls_back_to_the_readable_path_for_mixed_dtypes():
    p64 = torch.nn.Parameter(torch.ones(3, dtype=torch.float64))
    p32 = torch.nn.Parameter(torch.ones(3))
    opt = AdamW([p64, p32], lr=0.1, fused=True)
    p64.grad, p32.grad = torch.ones(3, dtype=torch.float64), torch.ones(3)
    opt.step()   # the fused kernel would raise on two dtypes in one list
    assert torch.allclose(p32, torch.full((3,), 1 - 0.1 * 0.01 - 0.1), atol=1e-6), "mixed-dtype fused step is wrong"


class FakeLibc:
    """Stands in for ctypes.CDLL(None): records each mallopt(param, value) and answers `answer` (glibc: 1 = taken)."""

    def __init__(self, answer=1):
        self.calls, self.answer = [], answer
        self.mallopt = self.Function(self)

    class Function:   # a ctypes function: argtypes/restype are set on it, then it is called
        def __init__(self, libc):
            self.libc = libc

        def __call__(self, param, value):
            self.libc.calls.append((param, value))
            return self.libc.answer


# glibc's malloc.h: #define M_TRIM_THRESHOLD -1, #define M_MMAP_MAX -4; its documented defaults (mallopt(3)):
# trim threshold 128 KiB, at most 65536 mmapped blocks. What RSS does after that is the allocator's business
# (bench/keep_memory_rss.py measures it); the test grades what minbert asks glibc for.
M_TRIM_THRESHOLD, M_MMAP_MAX = -1, -4


def test_keep_memory_asks_glibc_to_keep_freed_blocks_and_off_restores_its_defaults(monkeypatch):
    libc = FakeLibc()
    monkeypatch.setattr(device.platform, "system", lambda: "Linux")
    monkeypatch.setattr(device.ctypes, "CDLL", lambda name: libc)
    assert keep_freed_memory(True) is True, "minbert.core.device.keep_freed_memory(True): glibc took the settings, expected True"
    on = dict(libc.calls)
    assert on.get(M_MMAP_MAX) == 0, f"keep_freed_memory(True) must set M_MMAP_MAX (-4) to 0 (no mmapped blocks), asked {on}"
    assert on.get(M_TRIM_THRESHOLD, 0) >= 2**31 - 1, \
        f"keep_freed_memory(True) must set M_TRIM_THRESHOLD (-1) to the int maximum (never trim), asked {on}"
    libc.calls.clear()
    assert keep_freed_memory(False) is True
    assert dict(libc.calls) == {M_TRIM_THRESHOLD: 128 * 1024, M_MMAP_MAX: 65536}, \
        f"keep_freed_memory(False) must restore glibc's documented defaults, asked {dict(libc.calls)}"
    refused = FakeLibc(answer=0)
    monkeypatch.setattr(device.ctypes, "CDLL", lambda name: refused)
    assert keep_freed_memory(True) is False, "mallopt returned 0 (refused): keep_freed_memory must report False"
    monkeypatch.setattr(device.platform, "system", lambda: "Darwin")
    refused.calls.clear()
    assert keep_freed_memory(True) is False and refused.calls == [], "off Linux keep_freed_memory must do nothing"


@pytest.mark.skipif(platform.system() != "Linux" or not platform.libc_ver()[0] == "glibc",
                    reason="keep_memory is a glibc setting; elsewhere it is a no-op by design")
def test_keep_memory_is_taken_by_this_glibc():
    try:
        assert keep_freed_memory(True), "glibc refused mallopt(M_MMAP_MAX=0, M_TRIM_THRESHOLD=...)"
    finally:
        assert keep_freed_memory(False), "could not restore glibc's defaults"


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_keep_memory_changes_no_number(precision):
    keep_freed_memory(False)
    want = run(precision, fused=False)
    try:
        keep_freed_memory(True)
        got = run(precision, fused=False)
    finally:
        keep_freed_memory(False)
    assert all(torch.equal(a, b) for a, b in zip(got, want)), f"keep_memory changed the parameters ({precision})"


def test_flag_accepts_auto_off_and_lists_and_rejects_unknown_names():
    p = argparse.ArgumentParser()
    fast_paths.add_args(p)
    assert fast_paths.names(p.parse_args([]).fast_paths) == set(fast_paths.PATHS), "default must be auto (all)"
    assert fast_paths.names(p.parse_args(["--fast_paths", "fused_adamw"]).fast_paths) == {"fused_adamw"}
    with pytest.raises(SystemExit):
        p.parse_args(["--fast_paths", "fused_adam"])   # a typo must stop at parse time
    alone = fast_paths.from_args(argparse.Namespace(fast_paths="keep_memory"), torch.device("cpu"))
    assert not alone.keep_memory, "keep_memory without fused_adamw slowed the readable step down; it must not apply"
    mps = fast_paths.from_args(argparse.Namespace(fast_paths="auto"), torch.device("mps"))
    assert not (mps.fused_adamw or mps.keep_memory or mps.dropout_mask), "fast paths must apply only where implemented"
    fast_paths.from_args(argparse.Namespace(fast_paths="off"), torch.device("cpu"))   # leave the readable dropout on
