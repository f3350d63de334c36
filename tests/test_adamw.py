"""Tests for minbert/adamw.py: AdamW, param_groups, linear_warmup_decay.

Run: python -m pytest -q tests/test_adamw.py   (offline, CPU, a few seconds)
"""

import copy
import io

import pytest
import torch

from minbert.adamw import AdamW, linear_warmup_decay, param_groups

STEP = "minbert.adamw.AdamW.step"


# ---------------------------------------------------------------------------- helpers
def make_mlp(seed=0):
    """Linear(8,16) -> Tanh -> Linear(16,4), initialised from an explicit generator."""
    g = torch.Generator().manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    return model


def make_batches(n_steps, seed=1):
    """n_steps fixed regression batches (x, y) with x (16, 8) and y (16, 4)."""
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(16, 8, generator=g), torch.randn(16, 4, generator=g)) for _ in range(n_steps)]


def max_abs_diff(tensors_a, tensors_b):
    return max((a - b).abs().max().item() for a, b in zip(tensors_a, tensors_b))


def train(model, opt, batches, scheduler=None, on_step=None):
    """Plain MSE loop. on_step(i, model, opt) runs after backward, before opt.step()."""
    for i, (x, y) in enumerate(batches):
        opt.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        if on_step is not None:
            on_step(i, model, opt)
        opt.step()
        if scheduler is not None:
            scheduler.step()


def two_groups(model, lr_w, wd_w, lr_b, wd_b):
    """Weights and biases in separate groups with their own lr and weight_decay."""
    return [
        {"params": [p for p in model.parameters() if p.ndim >= 2], "lr": lr_w, "weight_decay": wd_w},
        {"params": [p for p in model.parameters() if p.ndim < 2], "lr": lr_b, "weight_decay": wd_b},
    ]


def set_lr_at_50(i, model, opt):
    if i == 50:
        for group in opt.param_groups:
            group["lr"] = group["lr"] * 0.1


# ------------------------------------------------------- trajectory vs torch.optim.AdamW
HPARAM_SETS = {
    "defaults": dict(kwargs={}),
    "no_weight_decay": dict(kwargs=dict(lr=3e-3, weight_decay=0.0)),
    "betas_eps_large_decay": dict(kwargs=dict(lr=5e-3, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1)),
    "beta1_zero": dict(kwargs=dict(lr=1e-3, betas=(0.0, 0.99), eps=1e-4, weight_decay=0.01)),
    "two_groups": dict(kwargs=dict(lr=1e-3), groups=(2e-3, 0.05, 1e-2, 0.0)),
    "lr_edited_at_step_50": dict(kwargs=dict(lr=1e-2, weight_decay=0.02), on_step=set_lr_at_50),
    "linear_warmup_decay": dict(kwargs=dict(lr=1e-2, weight_decay=0.01), schedule=(20, 120)),
}


@pytest.mark.parametrize("name", list(HPARAM_SETS))
def test_adamw_matches_torch_adamw_trajectory(name):
    """live oracle: torch.optim.AdamW(foreach=False), 120 steps on a small MLP, same init and data."""
    case = HPARAM_SETS[name]
    ours_model, ref_model = make_mlp(), make_mlp()
    if "groups" in case:
        ours_opt = AdamW(two_groups(ours_model, *case["groups"]), **case["kwargs"])
        ref_opt = torch.optim.AdamW(two_groups(ref_model, *case["groups"]), foreach=False, **case["kwargs"])
    else:
        ours_opt = AdamW(ours_model.parameters(), **case["kwargs"])
        ref_opt = torch.optim.AdamW(ref_model.parameters(), foreach=False, **case["kwargs"])
    ours_sched = ref_sched = None
    if "schedule" in case:
        ours_sched = linear_warmup_decay(ours_opt, *case["schedule"])
        ref_sched = linear_warmup_decay(ref_opt, *case["schedule"])

    batches = make_batches(120)
    train(ours_model, ours_opt, batches, ours_sched, case.get("on_step"))
    train(ref_model, ref_opt, batches, ref_sched, case.get("on_step"))

    tol = 1e-6
    diff = max_abs_diff(ours_model.parameters(), ref_model.parameters())
    assert diff <= tol, f"{STEP}: max |Δp| = {diff:.2e} after 120 steps vs torch.optim.AdamW [{name}] (tol {tol:.0e})"
    ours_v = [ours_opt.state[p]["exp_avg_sq"] for p in ours_model.parameters()]
    ref_v = [ref_opt.state[p]["exp_avg_sq"] for p in ref_model.parameters()]
    diff = max_abs_diff(ours_v, ref_v)
    assert diff <= tol, f"{STEP}: max |Δv| (exp_avg_sq) = {diff:.2e} vs torch.optim.AdamW [{name}] (tol {tol:.0e})"


def test_adamw_handles_unequal_step_counts_like_torch():
    """live oracle: torch.optim.AdamW(foreach=False); the last layer has no grad for the first 10
    steps, so its step count lags and the per-tensor bias-correction path is used."""
    def drop_last_layer_grad(i, model, opt):
        if i < 10:
            model[2].weight.grad = None
            model[2].bias.grad = None

    ours_model, ref_model = make_mlp(), make_mlp()
    ours_opt = AdamW(ours_model.parameters(), lr=3e-3, weight_decay=0.05)
    ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=3e-3, weight_decay=0.05, foreach=False)
    batches = make_batches(100)
    train(ours_model, ours_opt, batches, on_step=drop_last_layer_grad)
    train(ref_model, ref_opt, batches, on_step=drop_last_layer_grad)

    assert ours_opt.state[ours_model[2].weight]["step"] == 90, f"{STEP}: step count should skip grad-None steps"
    tol = 1e-6
    diff = max_abs_diff(ours_model.parameters(), ref_model.parameters())
    assert diff <= tol, f"{STEP}: max |Δp| = {diff:.2e} with unequal step counts (tol {tol:.0e})"


def test_adamw_handles_mixed_dtypes_in_one_group():
    """live oracle: torch.optim.AdamW(foreach=False) on one float32 and one float64 parameter."""
    g = torch.Generator().manual_seed(0)
    init = [torch.randn(5, 3, generator=g), torch.randn(7, generator=g, dtype=torch.float64)]
    ours = [torch.nn.Parameter(t.clone()) for t in init]
    ref = [torch.nn.Parameter(t.clone()) for t in init]
    ours_opt = AdamW(ours, lr=1e-2, weight_decay=0.1)
    ref_opt = torch.optim.AdamW(ref, lr=1e-2, weight_decay=0.1, foreach=False)
    for _ in range(20):
        grads = [torch.randn(t.shape, generator=g, dtype=t.dtype) for t in init]
        for params, opt in ((ours, ours_opt), (ref, ref_opt)):
            for p, grad in zip(params, grads):
                p.grad = grad.clone()
            opt.step()
    tol = 1e-6
    diff = max_abs_diff(ours, ref)
    assert diff <= tol, f"{STEP}: max |Δp| = {diff:.2e} with float32 + float64 in one group (tol {tol:.0e})"


# ----------------------------------------------------------- decoupled decay properties
def run_cs224n_setup(make_opt):
    """The handout's optimizer_test: Linear(3,2,bias=False), 1000 single-example steps,
    x ~ U(0,1)^3, target (x0 + x1, -x2), summed squared loss. Returns the final weight (2, 3)."""
    g = torch.Generator().manual_seed(0)
    model = torch.nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        model.weight.copy_(torch.rand(2, 3, generator=g) * 2 - 1)
    opt = make_opt(model.parameters())
    for _ in range(1000):
        opt.zero_grad()
        x = torch.rand(3, generator=g)
        y = torch.stack([x[0] + x[1], -x[2]])
        ((y - model(x)) ** 2).sum().backward()
        opt.step()
    return model.weight.detach()


def test_decoupled_decay_is_not_l2_and_matches_torch():
    """live oracle: torch.optim.AdamW (must match) and torch.optim.Adam(weight_decay=λ), which adds
    λ·p to the gradient (L2), must differ. lr 1e-3, λ 1e-4, as in the CS224N handout."""
    ours = run_cs224n_setup(lambda ps: AdamW(ps, lr=1e-3, weight_decay=1e-4))
    ref = run_cs224n_setup(lambda ps: torch.optim.AdamW(ps, lr=1e-3, weight_decay=1e-4, foreach=False))
    l2 = run_cs224n_setup(lambda ps: torch.optim.Adam(ps, lr=1e-3, weight_decay=1e-4, foreach=False))

    tol = 1e-6
    diff = (ours - ref).abs().max().item()
    # The two variants end about 4e-5 apart here, so 1e-5 separates them with margin.
    gap = (ours - l2).abs().max().item()
    hint = (" (hint: this is Adam + L2. Decoupled weight decay: decay must not go through the Adam moments;"
            " shrink p by (1 − lr·λ) apart from the gradient)") if gap < 1e-5 else ""
    assert diff <= tol, f"{STEP}: max |Δp| = {diff:.2e} after 1000 steps vs torch.optim.AdamW (tol {tol:.0e}){hint}"
    assert gap >= 1e-5, (
        f"{STEP}: max |Δp| vs Adam+L2 is only {gap:.2e} (need >= 1e-5): "
        "is weight decay being added to the gradient instead of applied to p?"
    )


def test_zero_gradient_step_is_exactly_lr_scaled_decay():
    """property: with g = 0 and λ > 0, one step gives exactly p·(1 − lr·λ) (m = v = 0, so the
    Adam part is 0; decay is scaled by lr and does not pass through 1/sqrt(v))."""
    g = torch.Generator().manual_seed(0)
    p = torch.nn.Parameter(torch.randn(4, 5, generator=g))
    expected = p.detach() * (1 - 0.1 * 0.5)
    opt = AdamW([p], lr=0.1, weight_decay=0.5)
    p.grad = torch.zeros_like(p)
    opt.step()
    diff = (p.detach() - expected).abs().max().item()
    assert diff == 0.0, f"{STEP}: zero-grad step should be p·(1 − lr·λ) exactly, max |Δp| = {diff:.2e} (tol 0)"


def test_first_step_moves_each_coordinate_by_lr_times_sign():
    """property: from m = v = 0 with λ = 0, bias correction makes m̂ = g and v̂ = g², so the first
    step is −lr·g/(|g| + ε) ≈ −lr·sign(g), whatever the size of g."""
    g = torch.Generator().manual_seed(0)
    magnitude = torch.rand(50, generator=g) * 10 + 0.1  # 0.1 .. 10.1, far from 0
    sign = torch.where(torch.rand(50, generator=g) < 0.5, -1.0, 1.0)
    lr = 1e-3
    p = torch.nn.Parameter(torch.zeros(50))  # start at 0 so Δp = p exactly, no rounding
    p.grad = sign * magnitude
    AdamW([p], lr=lr, weight_decay=0.0).step()
    tol = lr * 1e-6  # ε/|g| ≤ 1e-7 plus a few float32 ulps, relative
    diff = (p.detach() - (-lr * sign)).abs().max().item()
    assert diff <= tol, f"{STEP}: first step should be −lr·sign(g), max |Δp| = {diff:.2e} (tol {tol:.0e})"


# ------------------------------------------------------------ grad None, sparse, errors
def test_params_without_grad_are_untouched_and_get_no_state():
    """property: a param whose .grad is None is neither moved nor decayed and gets no state."""
    model = make_mlp()
    frozen = model[0].weight
    before = frozen.detach().clone()

    def drop_grad(i, model, opt):
        model[0].weight.grad = None

    opt = AdamW(model.parameters(), lr=1e-2, weight_decay=0.1)
    train(model, opt, make_batches(5), on_step=drop_grad)
    assert torch.equal(frozen.detach(), before), f"{STEP}: a param with grad None was changed (tol 0)"
    assert frozen not in opt.state, f"{STEP}: a param with grad None got optimizer state"
    assert model[2].weight in opt.state, f"{STEP}: params with a grad should get state"


def test_sparse_gradient_raises():
    """property: sparse gradients are not supported and must raise, not silently misbehave."""
    emb = torch.nn.Embedding(10, 4, sparse=True)
    emb(torch.tensor([1, 2, 3])).sum().backward()
    opt = AdamW(emb.parameters())
    with pytest.raises(RuntimeError, match="sparse"):
        opt.step()


@pytest.mark.parametrize(
    "kwargs",
    [dict(lr=-1e-3), dict(betas=(1.0, 0.999)), dict(betas=(0.9, -0.1)), dict(eps=-1e-8), dict(weight_decay=-0.1)],
)
def test_invalid_hyperparameters_raise_value_error(kwargs):
    """property: out-of-range hyperparameters are rejected at construction."""
    with pytest.raises(ValueError):
        AdamW(make_mlp().parameters(), **kwargs)


# ------------------------------------------------------------------- state_dict round trip
def test_state_dict_round_trip_continues_same_trajectory():
    """property: save after 30 steps (through torch.save bytes), load into a fresh AdamW on a copy of
    the model, run 30 more steps on both: the trajectories are identical."""
    batches = make_batches(60)
    model = make_mlp()
    opt = AdamW(model.parameters(), lr=3e-3, weight_decay=0.05)
    train(model, opt, batches[:30])

    buffer = io.BytesIO()
    torch.save(opt.state_dict(), buffer)
    buffer.seek(0)
    model_copy = copy.deepcopy(model)
    opt_copy = AdamW(model_copy.parameters(), lr=1.0, weight_decay=0.0)  # hparams come from the dict
    opt_copy.load_state_dict(torch.load(buffer))
    assert opt_copy.state[model_copy[0].weight]["step"] == 30, "AdamW state_dict lost the step count"

    train(model, opt, batches[30:])
    train(model_copy, opt_copy, batches[30:])
    diff = max_abs_diff(model.parameters(), model_copy.parameters())
    assert diff == 0.0, f"{STEP} / state_dict: max |Δp| = {diff:.2e} after reload + 30 steps (tol 0)"


# ------------------------------------------------------ param_groups, linear_warmup_decay
def test_param_groups_excludes_biases_and_layernorm_from_decay():
    """property: matrices and embeddings are decayed; biases and LayerNorm weights are not;
    frozen params are left out."""
    model = torch.nn.ModuleDict(dict(
        emb=torch.nn.Embedding(10, 8), dense=torch.nn.Linear(8, 8),
        ln=torch.nn.LayerNorm(8), frozen=torch.nn.Linear(8, 2),
    ))
    model["frozen"].requires_grad_(False)
    decayed, not_decayed = param_groups(model, weight_decay=0.01)
    fn = "minbert.adamw.param_groups"
    assert decayed["weight_decay"] == 0.01 and not_decayed["weight_decay"] == 0.0, f"{fn}: wrong weight_decay values"
    ids = lambda ps: {id(p) for p in ps}
    assert ids(decayed["params"]) == ids([model["emb"].weight, model["dense"].weight]), f"{fn}: wrong decayed set"
    assert ids(not_decayed["params"]) == ids([model["dense"].bias, model["ln"].weight, model["ln"].bias]), (
        f"{fn}: biases and LayerNorm weights must be in the no-decay group"
    )
    AdamW(param_groups(model, 0.01))  # the groups are accepted as-is


def lr_after(optimizer, scheduler, n_steps):
    for _ in range(n_steps):
        optimizer.step()  # no grads: nothing moves, but it keeps the scheduler's order check quiet
        scheduler.step()
    return optimizer.param_groups[0]["lr"]


@pytest.mark.parametrize(
    "warmup, total, step, multiplier",
    [(10, 50, 0, 0.0), (10, 50, 5, 0.5), (10, 50, 10, 1.0), (10, 50, 30, 0.5), (10, 50, 50, 0.0),
     (10, 50, 60, 0.0), (0, 40, 0, 1.0), (0, 40, 10, 0.75)],
)
def test_linear_warmup_decay_matches_formula(warmup, total, step, multiplier):
    """property: multiplier = t/warmup during warm-up, then (total − t)/(total − warmup), 0 after."""
    opt = AdamW(make_mlp().parameters(), lr=2e-3)
    lr = lr_after(opt, linear_warmup_decay(opt, warmup, total), step)
    assert abs(lr - 2e-3 * multiplier) <= 1e-12, (
        f"minbert.adamw.linear_warmup_decay: lr at step {step} = {lr:.3e}, expected {2e-3 * multiplier:.3e} (tol 1e-12)"
    )


def test_linear_warmup_decay_matches_hf_schedule():
    """live oracle: transformers.get_linear_schedule_with_warmup, every step of a 30-step run."""
    transformers = pytest.importorskip("transformers")
    ours_opt, ref_opt = AdamW(make_mlp().parameters(), lr=1.0), AdamW(make_mlp().parameters(), lr=1.0)
    ours = linear_warmup_decay(ours_opt, 7, 30)
    ref = transformers.get_linear_schedule_with_warmup(ref_opt, 7, 30)
    for step in range(32):
        a, b = ours_opt.param_groups[0]["lr"], ref_opt.param_groups[0]["lr"]
        assert abs(a - b) <= 1e-12, f"minbert.adamw.linear_warmup_decay: step {step}: {a} vs HF {b} (tol 1e-12)"
        lr_after(ours_opt, ours, 1)
        lr_after(ref_opt, ref, 1)
