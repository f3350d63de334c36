"""Tests for minbert/methods/smart.py: divergence (ℓ_s), SMART's adversarial term R_s and its Bregman teacher.

Run: python -m pytest -q tests/methods/test_smart.py   (offline, CPU, tiny model, a few seconds)
Oracles: (b) a brute-force NumPy KL for `divergence`; (c) properties everywhere else: ℓ_s ≥ 0 and
symmetric, ‖δ‖∞ ≤ ε, one ascent step increases ℓ_s, EMA fixed points, where gradients flow.
Shapes: B batch, T tokens, C hidden (δ is (B, T, C)).
"""

import io

import numpy as np
import pytest
import torch

from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.methods.smart import SMART, divergence
from minbert.tasks.multitask import TASKS, MultitaskBert, task_loss
from conftest import B, flags_parser, make_batch

DIV = "minbert.methods.smart.divergence"
PERTURB = "minbert.methods.smart.SMART.perturb"
ADV = "minbert.methods.smart.SMART.adversarial_loss"
BREG = "minbert.methods.smart.SMART.bregman_loss"
EMA = "minbert.methods.smart.SMART.update_teacher"


# ---------------------------------------------------------------------------- helpers
def make_model(seed=0, **config):
    torch.manual_seed(seed)
    return MultitaskBert(BertModel(BertConfig.tiny(**config)))


def random_outputs(task, seed, scale=2.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    shape = (B, 5) if task == "sst" else (B,)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def numpy_symmetric_kl(task, p, q):
    """Brute force in float64: KL(P‖Q) + KL(Q‖P) per example, averaged; squared error for sts."""
    p, q = p.double().numpy(), q.double().numpy()
    if task == "sts":
        return np.mean((p - q) ** 2)
    if task == "para":                                    # Bernoulli: P = [1 − σ(z), σ(z)]
        P = np.stack([1 - 1 / (1 + np.exp(-p)), 1 / (1 + np.exp(-p))], -1)
        Q = np.stack([1 - 1 / (1 + np.exp(-q)), 1 / (1 + np.exp(-q))], -1)
    else:
        P = np.exp(p) / np.exp(p).sum(-1, keepdims=True)
        Q = np.exp(q) / np.exp(q).sum(-1, keepdims=True)
    kl = lambda a, b: np.sum(a * (np.log(a) - np.log(b)), -1)
    return np.mean(kl(P, Q) + kl(Q, P))


def nudge(model, seed=1, scale=0.1):
    """Add N(0, scale²) to every student weight in place (a stand-in for an optimizer step)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=g) * scale)


def max_param_diff(a, b):
    sb = dict(b.named_parameters())
    return max((p - sb[n]).abs().max().item() for n, p in a.named_parameters())


# ---------------------------------------------------------------------------- divergence (ℓ_s)
@pytest.mark.parametrize("task", TASKS)
def test_divergence_matches_numpy_symmetric_kl(task):
    """oracle (b): NumPy float64 brute force; fp32 inputs, atol 1e-6 / rtol 1e-5."""
    p, q = random_outputs(task, 1), random_outputs(task, 2)
    got, want = divergence(task, p, q).item(), numpy_symmetric_kl(task, p, q)
    assert abs(got - want) <= 1e-6 + 1e-5 * abs(want), (
        f"{DIV}[{task}]: got {got:.8f}, NumPy symmetric KL {want:.8f}, |diff| {abs(got - want):.2e}")


@pytest.mark.parametrize("task", TASKS)
def test_divergence_is_symmetric_nonnegative_and_zero_on_equal_inputs(task):
    """property: ℓ_s(p, q) = ℓ_s(q, p) (atol 1e-7), ℓ_s ≥ 0, ℓ_s(p, p) = 0 exactly."""
    p, q = random_outputs(task, 3), random_outputs(task, 4)
    pq, qp, pp = divergence(task, p, q).item(), divergence(task, q, p).item(), divergence(task, p, p).item()
    assert abs(pq - qp) <= 1e-7, f"{DIV}[{task}] is not symmetric: ℓ(p,q)={pq:.8f}, ℓ(q,p)={qp:.8f}"
    assert pq > 0, f"{DIV}[{task}]: ℓ(p,q)={pq:.3e} should be > 0 for p ≠ q"
    assert pp == 0.0, f"{DIV}[{task}]: ℓ(p,p)={pp:.3e} should be exactly 0"


@pytest.mark.parametrize("task", ["para", "sts"])
def test_one_output_divergences_are_nonzero_where_one_logit_softmax_is_zero(task):
    """property: a KL of a softmax over ONE logit is identically 0 (the jelc53 bug); ours is not,
    and 'para' equals its closed form (σ(z_p) − σ(z_q))·(z_p − z_q) (atol 1e-7)."""
    p, q = random_outputs(task, 5), random_outputs(task, 6)
    naive = divergence("sst", p[:, None], q[:, None]).item()          # softmax over (B, 1)
    ours = divergence(task, p, q).item()
    assert naive == 0.0, "sanity: a one-logit softmax KL should be 0"
    assert ours > 1e-3, f"{DIV}[{task}]: {ours:.3e}, should be clearly > 0 (is it a softmax over one logit?)"
    if task == "para":
        closed = ((p.sigmoid() - q.sigmoid()) * (p - q)).mean().item()
        assert abs(ours - closed) <= 1e-7, f"{DIV}[para]: {ours:.8f} vs Bernoulli closed form {closed:.8f}"


@pytest.mark.parametrize("task", TASKS)
def test_divergence_is_fp32_under_bf16_autocast(task):
    """property: bf16 inputs in autocast give an fp32, finite result close to the fp32 one (rtol 2e-2)."""
    p, q = random_outputs(task, 7), random_outputs(task, 8)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        got = divergence(task, p.bfloat16(), q.bfloat16())
    want = divergence(task, p.bfloat16().float(), q.bfloat16().float())
    assert got.dtype == torch.float32, f"{DIV}[{task}]: dtype {got.dtype} under autocast, expected float32"
    assert torch.isfinite(got) and abs(got - want) <= 2e-2 * want, f"{DIV}[{task}]: {got.item()} vs {want.item()}"


# ---------------------------------------------------------------------------- R_s and the ascent
@pytest.mark.parametrize("task", TASKS)
def test_adversarial_term_is_nonnegative_and_nonzero_for_every_head(task):
    """property: R_s ≥ 0 with default (paper) hyperparameters in train mode; > 0 since
    the passes use different dropout masks (every head type, including the one-output ones)."""
    model, batch = make_model().train(), make_batch(task)
    smart = SMART(model)
    r = smart.adversarial_loss(task, batch, model(task, batch)).item()
    assert r > 0, f"{ADV}[{task}]: R_s = {r:.3e}, expected > 0 (≥ 0 always; dropout makes it non-zero)"


@pytest.mark.parametrize("task", TASKS)
def test_smart_terms_are_zero_without_noise_or_dropout(task):
    """property: ε = σ = 0 in eval mode: x̃ = x, so R_s = 0; at construction θ̃ = θ, so D_Breg = 0.
    Exactly zero (tol 0): the perturbed pass is the clean pass bit for bit."""
    model, batch = make_model().eval(), make_batch(task)
    smart = SMART(model, epsilon=0.0, sigma=0.0)
    clean = model(task, batch)
    r, d, total = (smart.adversarial_loss(task, batch, clean).item(), smart.bregman_loss(task, batch, clean).item(),
                   smart.loss(task, batch, clean).item())
    assert r == 0.0, f"{ADV}[{task}]: R_s = {r:.3e} with ε = σ = 0 and dropout off, expected 0"
    assert d == 0.0, f"{BREG}[{task}]: D_Breg = {d:.3e} before any update (θ̃ = θ), expected 0"
    assert total == 0.0, f"minbert.methods.smart.SMART.loss[{task}]: {total:.3e}, expected 0"


@pytest.mark.parametrize("epsilon,eta", [(1e-5, 1e-3), (1e-3, 1e-3), (0.05, 1e-2)])
def test_perturbation_stays_in_the_epsilon_ball(epsilon, eta):
    """property: paper mode, 2 ascent steps: ‖δ_i‖∞ ≤ ε + 1e-12 for every example i of (B, T, C)
    (ε rounded to fp32 first: fp32(1e-3) is 1e-3 + 4.7e-11).
    At the defaults (η = 1e-3 ≫ ε = 1e-5) the projection binds: every example reaches ‖δ_i‖∞ = ε."""
    model, batch = make_model().train(), make_batch("sst")
    smart = SMART(model, epsilon=epsilon, sigma=1e-5, eta=eta, steps=2)
    x = model.embed(batch)
    delta = smart.perturb("sst", batch, x, model("sst", batch))
    assert delta.shape == x.shape, f"{PERTURB}: δ has shape {tuple(delta.shape)}, expected (B, T, C) {tuple(x.shape)}"
    norms = delta.abs().amax(dim=(1, 2))                                 # (B,)
    bound = torch.tensor(epsilon, dtype=delta.dtype).item()              # ε as δ's fp32 can hold it
    assert norms.max().item() <= bound + 1e-12, (
        f"{PERTURB}: max ‖δ_i‖∞ = {norms.max().item():.6e} > ε = {epsilon:.0e} (projection missing?)")
    if eta > 10 * epsilon:
        torch.testing.assert_close(norms, torch.full_like(norms, bound), atol=1e-12, rtol=0,
                                   msg=lambda m: f"{PERTURB}: with η ≫ ε the clamp should bind per example:\n{m}")


def test_gradient_is_normalised_per_example():
    """property: from δ_0 = 0 with a ball too large to bind (ε = 1), one step gives δ = η·g/‖g_i‖∞,
    so EVERY example has ‖δ_i‖∞ = η (rtol 1e-5), not only the one with the largest gradient."""
    model, batch = make_model().train(), make_batch("sst")           # dropout: g ≠ 0 at δ = 0
    smart = SMART(model, epsilon=1.0, eta=1e-3, steps=1)
    x = model.embed(batch)
    delta = smart.perturb("sst", batch, x, model("sst", batch), delta=torch.zeros_like(x))
    norms = delta.abs().amax(dim=(1, 2))                                 # (B,)
    torch.testing.assert_close(norms, torch.full_like(norms, 1e-3), atol=0, rtol=1e-5,
                               msg=lambda m: f"{PERTURB}: ‖δ_i‖∞ should be η for every example i:\n{m}")


def test_reference_mode_rescales_each_token_to_inf_norm_about_one():
    """property (mt-dnn behaviour): no ε-ball; each token's δ (C,) is rescaled to ∞-norm in
    (0.8, 1]: δ/(max|δ| + 1e-6) with max|δ| ~ 2σ = 2e-5 gives ≈ 0.95. No teacher in this mode."""
    model, batch = make_model().train(), make_batch("para")
    smart = SMART(model, mode="reference")
    delta = smart.perturb("para", batch, model.embed(batch), model("para", batch))
    norms = delta.abs().amax(-1)                                         # (B, T)
    assert 0.8 < norms.min().item() and norms.max().item() <= 1.0, (
        f"{PERTURB}[reference]: per-token ∞-norms in [{norms.min().item():.3f}, {norms.max().item():.3f}], expected (0.8, 1]")
    assert smart.teacher is None, "minbert.methods.smart.SMART: reference mode has no Bregman teacher"


@pytest.mark.parametrize("task", TASKS)
def test_one_ascent_step_increases_the_divergence(task):
    """property, fp64, eval mode: ℓ_s(f(x + δ_1), f(x)) > ℓ_s(f(x + δ_0), f(x)) for the same
    start δ_0 ~ N(0, (1e-4)²); ε = 1e-3 and η = 1e-4 keep the step inside the ball."""
    model = make_model().double().eval()
    batch = make_batch(task)
    smart = SMART(model, epsilon=1e-3, eta=1e-4, steps=1, mu=0)
    with torch.no_grad():
        clean = model(task, batch)
        x = model.embed(batch)
    delta0 = torch.randn(x.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 1e-4
    delta1 = smart.perturb(task, batch, x, clean, delta=delta0)
    with torch.no_grad():
        before = divergence(task, model(task, batch, embeds=x + delta0), clean).item()
        after = divergence(task, model(task, batch, embeds=x + delta1), clean).item()
    assert after > before * 1.01, f"{PERTURB}[{task}]: ℓ_s went {before:.6e} -> {after:.6e}, expected an increase"


def test_ascent_computes_no_weight_gradients_and_costs_three_forwards():
    """property (cost): SMART.loss runs the student's layers twice (ascent, adversarial) and the
    teacher's once, and leaves every .grad untouched (the ascent differentiates w.r.t. δ only)."""
    model, batch = make_model().train(), make_batch("sst")
    smart = SMART(model)
    calls = {"student": 0, "teacher": 0}
    model.encoder.layers[0].register_forward_hook(lambda *_: calls.__setitem__("student", calls["student"] + 1))
    smart.teacher.encoder.layers[0].register_forward_hook(lambda *_: calls.__setitem__("teacher", calls["teacher"] + 1))
    clean = model("sst", batch)
    calls["student"] = 0
    smart.loss("sst", batch, clean)
    assert calls == {"student": 2, "teacher": 1}, f"minbert.methods.smart.SMART.loss: layer passes {calls}, expected 2 + 1"
    assert all(p.grad is None for p in model.parameters()), f"{PERTURB}: the ascent wrote into .grad"


@pytest.mark.parametrize("task", TASKS)
def test_both_terms_send_gradient_into_the_clean_output(task):
    """property (paper variant): ℓ_s(f(x̃;θ), f(x;θ)) and ℓ_s(f(x;θ), f(x;θ̃)) are differentiated on
    the clean side too: a clean output passed as a leaf gets a non-zero gradient from each term."""
    model, batch = make_model().train(), make_batch(task)
    smart = SMART(model)
    nudge(model)                                                         # θ ≠ θ̃, so D_Breg has a slope
    for name, term in (("adversarial_loss", smart.adversarial_loss), ("bregman_loss", smart.bregman_loss)):
        clean = model(task, batch).detach().requires_grad_(True)
        term(task, batch, clean).backward()
        assert clean.grad is not None and clean.grad.abs().max() > 0, (
            f"minbert.methods.smart.SMART.{name}[{task}]: no gradient reached the clean output (detached?)")


def test_adversarial_gradient_reaches_encoder_weights_and_not_the_teacher():
    """property: backward of R_s + D_Breg gives non-zero grads on the encoder (first layer's
    query, word embeddings) and none on the teacher, whose tensors never carry autograd history."""
    model, batch = make_model().train(), make_batch("sst")
    smart = SMART(model)
    smart.adversarial_loss("sst", batch, model("sst", batch).detach()).backward()
    for name, p in [("encoder.layers.0.self_attention.query.weight", model.encoder.layers[0].self_attention.query.weight),
                    ("encoder.embeddings.word_embedding.weight", model.encoder.embeddings.word_embedding.weight)]:
        assert p.grad is not None and p.grad.abs().max() > 0, f"{ADV}: no gradient reached {name}"
    model.zero_grad(set_to_none=True)
    smart.bregman_loss("sst", batch, model("sst", batch)).backward()
    assert model.heads["sst"][-1].weight.grad is not None, f"{BREG}: no gradient reached the student's head"
    for name, p in smart.teacher.named_parameters():
        assert p.grad is None and not p.requires_grad and p.grad_fn is None, f"{BREG}: teacher {name} got a gradient"


# ---------------------------------------------------------------------------- the teacher θ̃ (EMA)
def test_teacher_is_a_copy_and_constant_weights_stay_fixed():
    """property: θ̃ does not alias θ (editing θ leaves θ̃); with θ constant, 50 EMA updates keep
    θ̃ = θ exactly (tol 0), and θ̃ carries no autograd history."""
    model = make_model()
    smart = SMART(model, total_steps=100)
    nudge(model)
    assert max_param_diff(smart.teacher, model) > 0.01, "minbert.methods.smart.SMART.__init__: the teacher aliases the student"
    smart.teacher.load_state_dict(model.state_dict())
    for _ in range(50):
        smart.update_teacher()
    diff = max_param_diff(smart.teacher, model)
    assert diff == 0.0, f"{EMA}: constant θ drifted, max |θ̃ − θ| = {diff:.2e} after 50 updates"
    for name, p in smart.teacher.named_parameters():
        assert p.grad_fn is None and not p.requires_grad, f"{EMA}: teacher {name} has autograd history"
    assert not smart.teacher.training, "minbert.methods.smart.SMART: the teacher should stay in eval mode"


def test_teacher_with_beta_zero_copies_the_student():
    """property: β = 0 gives θ̃ ← θ after one update (tol 0)."""
    model = make_model()
    smart = SMART(model, beta=(0.0, 0.0))
    nudge(model)
    smart.update_teacher()
    diff = max_param_diff(smart.teacher, model)
    assert diff == 0.0, f"{EMA}: with β = 0, max |θ̃ − θ| = {diff:.2e}, expected 0"


def test_teacher_beta_switches_after_ten_percent_of_total_steps():
    """property: β = 0.99 for updates 0..9 of 100, 0.999 from update 10 on; one update after
    a nudge gives θ̃ = β·θ̃ + (1 − β)·θ (atol 1e-7, rtol 1e-6: fp32) with the β of that update."""
    model = make_model()
    smart = SMART(model, total_steps=100)
    betas = []
    for _ in range(12):
        betas.append(smart.current_beta)
        smart.update_teacher()
    assert betas == [0.99] * 10 + [0.999] * 2, f"minbert.methods.smart.SMART.current_beta: sequence {betas}"
    old = {n: p.clone() for n, p in smart.teacher.named_parameters()}
    nudge(model)
    smart.update_teacher()
    student = dict(model.named_parameters())
    for name, p in smart.teacher.named_parameters():
        want = 0.999 * old[name] + 0.001 * student[name]
        torch.testing.assert_close(p, want, atol=1e-7, rtol=1e-6, msg=lambda m: f"{EMA}: {name} after a 0.999 update:\n{m}")


def test_state_dict_round_trip_restores_teacher_and_update_count():
    """property: state_dict -> torch.save -> torch.load(weights_only) -> a fresh SMART's
    load_state_dict gives the same teacher (tol 0), update count and β."""
    model = make_model()
    smart = SMART(model, total_steps=20)
    for i in range(3):
        nudge(model, seed=i)
        smart.update_teacher()
    buf = io.BytesIO()
    torch.save(smart.state_dict(), buf)
    buf.seek(0)
    fresh = SMART(make_model(seed=5), total_steps=20)
    fresh.load_state_dict(torch.load(buf, weights_only=True))
    assert fresh.updates == 3 and fresh.current_beta == smart.current_beta, "minbert.methods.smart.SMART.load_state_dict: count/β lost"
    diff = max_param_diff(fresh.teacher, smart.teacher)
    assert diff == 0.0, f"minbert.methods.smart.SMART.load_state_dict: teacher differs by {diff:.2e} after the round trip"


def test_frozen_encoder_is_rejected():
    """property: SMART needs gradients through the encoder; a frozen one raises a clear error."""
    torch.manual_seed(0)
    model = MultitaskBert(BertModel(BertConfig.tiny()), frozen_encoder=True)
    with pytest.raises(ValueError, match="frozen"):
        SMART(model)


def test_frozen_encoder_with_pals_is_accepted_and_pals_get_the_gradient():
    """property: with PALs the frozen encoder still builds a graph, so the ascent works and R_s
    trains the PAL weights (non-zero grad) while the encoder's own weights stay without grad."""
    from minbert.methods.pals import PALs
    torch.manual_seed(0)
    encoder = BertModel(BertConfig.tiny())
    model = MultitaskBert(encoder, frozen_encoder=True, pals=PALs(encoder.config, TASKS, size=8, heads=2)).train()
    batch = make_batch("sst")
    SMART(model).adversarial_loss("sst", batch, model("sst", batch)).backward()
    pal_grads = [p.grad for p in model.pals.parameters() if p.grad is not None]
    assert pal_grads and max(g.abs().max().item() for g in pal_grads) > 0, f"{ADV}: no gradient reached the PALs"
    assert model.encoder.layers[0].interm_dense.weight.grad is None, f"{ADV}: a frozen encoder weight got a gradient"


def test_smart_loss_trains_under_bf16_autocast():
    """property: inside bf16 autocast the full term is fp32, finite, and backward reaches the weights."""
    model, batch = make_model().train(), make_batch("para")
    smart = SMART(model)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model("para", batch)
        reg = smart.loss("para", batch, out)
    assert reg.dtype == torch.float32 and torch.isfinite(reg), f"minbert.methods.smart.SMART.loss: {reg} under bf16 autocast"
    (task_loss("para", out, batch["labels"]) + reg).backward()
    assert model.encoder.layers[0].interm_dense.weight.grad is not None, "minbert.methods.smart.SMART.loss: no gradient under autocast"


# ---------------------------------------------------------------------------- graded on a stand-in model
class Toy(torch.nn.Module):
    """A stand-in for MultitaskBert with its interface (embed, forward(task, batch, embeds=)): embedding ->
    dropout -> Linear + tanh -> mean over T -> one head per task. No BERT runs, so the SMART grades
    do not depend on assignments 1-5. The buffer stands for R4F's power-iteration vectors."""

    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.emb, self.enc, self.drop = torch.nn.Embedding(1000, 8), torch.nn.Linear(8, 8), torch.nn.Dropout(0.1)
        self.heads = torch.nn.ModuleDict({"sst": torch.nn.Linear(8, 5), "para": torch.nn.Linear(8, 1), "sts": torch.nn.Linear(8, 1)})
        self.register_buffer("u", torch.zeros(3))

    def embed(self, batch, word_embeds=None):
        return self.emb(batch["input_ids"])                                  # (B, T, C)

    def forward(self, task, batch, embeds=None, word_embeds=None):
        x = self.embed(batch) if embeds is None else embeds
        out = self.heads[task](torch.tanh(self.enc(self.drop(x))).mean(1))   # (B, 5) or (B, 1)
        return out.squeeze(-1) if out.shape[-1] == 1 else out                 # (B, 5) or (B,)


@pytest.mark.parametrize("task", TASKS)
def test_ascent_step_follows_the_divergence_gradient(task):
    """property, fp64, eval mode: one ascent step from δ_0 increases ℓ_s(f(x + δ), f(x))."""
    model, batch = Toy().double().eval(), make_batch(task)
    smart = SMART(model, epsilon=1e-2, eta=1e-3, steps=1, mu=0)
    with torch.no_grad():
        x, clean = model.embed(batch), model(task, batch)
    delta0 = torch.randn(x.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 1e-3
    delta1 = smart.perturb(task, batch, x, clean, delta=delta0)
    with torch.no_grad():
        before = divergence(task, model(task, batch, embeds=x + delta0), clean).item()
        after = divergence(task, model(task, batch, embeds=x + delta1), clean).item()
    assert after > before, f"{PERTURB}[{task}]: ℓ_s went {before:.6e} -> {after:.6e}; an ascent step must increase it (step along +g)"


def test_teacher_update_is_the_beta_weighted_average():
    """θ̃ ← β·θ̃ + (1 − β)·θ for every parameter (atol 1e-7), buffers copied, β from current_beta."""
    model = Toy()
    smart = SMART(model, total_steps=100)
    old = {n: p.clone() for n, p in smart.teacher.named_parameters()}
    nudge(model)
    model.u.fill_(3.0)
    smart.update_teacher()
    student = dict(model.named_parameters())
    for name, p in smart.teacher.named_parameters():
        want = 0.99 * old[name] + 0.01 * student[name]
        hint = " (hint: β weighs the TEACHER: β·θ̃ + (1 − β)·θ)" if torch.allclose(p, 0.01 * old[name] + 0.99 * student[name], atol=1e-7) else ""
        torch.testing.assert_close(p, want, atol=1e-7, rtol=1e-6, msg=lambda m: f"{EMA}: teacher {name} is not β·θ̃ + (1 − β)·θ with β = 0.99{hint}\n{m}")
    assert torch.equal(smart.teacher.u, model.u), f"{EMA}: copy the student's buffers into the teacher"
    assert smart.updates == 1, "minbert.methods.smart.SMART.update_teacher: count the update"


# ---------------------------------------------------------------------------- bi-encoder pair heads
def pair_batch():
    """A bi-encoder 'para' batch: sentence a (B, 12) as make_batch, sentence b (B, 12) from another seed."""
    a, b = make_batch("para", seed=0), make_batch("para", seed=1)
    return {**a, "input_ids_b": b["input_ids"], "attention_mask_b": b["attention_mask"],
            "token_type_ids_b": torch.zeros_like(b["token_type_ids"])}


@pytest.mark.parametrize("head", ["concat", "cosine"])
def test_bi_encoder_heads_are_perturbed_on_both_sentences_in_one_ball(head):
    """Alg. 1 written out on the two sentences' embedding outputs x_a (B, T, C) and x_b (B, T_b, C): one ascent
    step from (δ_a, δ_b), the gradient normalised by its ∞-norm over BOTH sentences per example, then the clamp.
    SMART's δ for a bi-encoder head must equal it (fp64, eval mode, no dropout)."""
    torch.manual_seed(0)
    model = MultitaskBert(BertModel(BertConfig.tiny()), pair_heads={"para": head}).double().eval()
    batch, eps, eta = pair_batch(), 1e-2, 1e-3
    smart = SMART(model, epsilon=eps, eta=eta, steps=1, mu=0)
    with torch.no_grad():
        clean = model("para", batch)
        xa = model.encoder.embed(batch["input_ids"], batch["token_type_ids"])          # (B, T, C)
        xb = model.encoder.embed(batch["input_ids_b"], batch["token_type_ids_b"])      # (B, T_b, C)
    g = torch.Generator().manual_seed(0)
    da0 = torch.randn(xa.shape, generator=g, dtype=torch.float64) * 1e-3
    db0 = torch.randn(xb.shape, generator=g, dtype=torch.float64) * 1e-3
    da, db = da0.clone().requires_grad_(True), db0.clone().requires_grad_(True)
    u = model.encoder.encode(xa + da, batch["attention_mask"])["pooler_output"]        # (B, C)
    v = model.encoder.encode(xb + db, batch["attention_mask_b"])["pooler_output"]      # (B, C)
    ga, gb = torch.autograd.grad(divergence("para", model.heads["para"](u, v).squeeze(-1), clean), (da, db))
    scale = torch.maximum(ga.abs().amax((1, 2)), gb.abs().amax((1, 2)))[:, None, None]  # (B, 1, 1): both sentences
    want_a, want_b = (da0 + eta * ga / scale).clamp(-eps, eps), (db0 + eta * gb / scale).clamp(-eps, eps)
    x = model.inputs("para", batch)
    assert x.shape == (B, xa.shape[1] + xb.shape[1], xa.shape[2]), \
        f"minbert.tasks.multitask.MultitaskBert.inputs: a bi-encoder task's input is both sentences side by side, got {tuple(x.shape)}"
    delta = smart.perturb("para", batch, x, clean, delta=torch.cat([da0, db0], 1))
    T = xa.shape[1]
    torch.testing.assert_close(delta[:, :T], want_a, msg=lambda m: f"{PERTURB}[{head}]: sentence a's δ:\n{m}")
    torch.testing.assert_close(delta[:, T:], want_b, msg=lambda m: f"{PERTURB}[{head}]: sentence b's δ (is b perturbed?):\n{m}")


def test_smart_trains_with_a_concat_pair_head_and_perturbs_sentence_b():
    """SMART.loss on a bi-encoder head: the ascent sees both sentences (T + T_b tokens), and the flags allow it."""
    import train_multitask
    torch.manual_seed(0)
    model, batch = MultitaskBert(BertModel(BertConfig.tiny()), pair_heads={"para": "concat"}).train(), pair_batch()
    smart, seen = SMART(model), []
    perturb = smart.perturb
    smart.perturb = lambda task, b, x, target, delta=None: seen.append(x.shape[1]) or perturb(task, b, x, target, delta)
    out = model("para", batch)
    (task_loss("para", out, batch["labels"]) + smart.loss("para", batch, out)).backward()
    assert seen == [2 * batch["input_ids"].shape[1]], f"{ADV}: the ascent perturbed {seen} tokens, expected both sentences' 24"
    args = train_multitask.parse_args(["--smart", "1", "--para_head", "concat", "--sts_head", "concat", "--limit", "4"])
    assert args.smart == 1 and args.para_head == "concat", "train_multitask.py: --smart 1 with concat pair heads must be accepted"


# ---------------------------------------------------------------------------- Algorithm 1 written out by hand
def torch_sym_kl(task, p, q):
    """ℓ_s written independently of divergence(): Σ_k (P_k − Q_k)(log P_k − log Q_k) for sst; the Bernoulli closed
    form (σ(z_p) − σ(z_q))(z_p − z_q) for para; squared error for sts. Mean over the batch, float64."""
    p, q = p.double(), q.double()
    if task == "sts":
        return ((p - q) ** 2).mean()
    if task == "para":
        return ((torch.sigmoid(p) - torch.sigmoid(q)) * (p - q)).mean()
    return ((p.softmax(-1) - q.softmax(-1)) * (p.log_softmax(-1) - q.log_softmax(-1))).sum(-1).mean()


@pytest.mark.parametrize("task", ["sst", "para"])
def test_loss_is_lambda_times_smoothness_plus_mu_times_bregman_by_hand(task):
    """Oracle: Jiang et al. Alg. 1 (one ascent step, ∞-norm, S = 1) written out here with torch.autograd in float64,
    eval mode (no dropout), the student nudged away from its teacher θ̃ = θ_0 so D_Breg ≠ 0:
        δ_0 ~ N(0, σ²) (same seed);  g = ∇_δ ℓ_s(f(x + δ_0), f(x));  δ = clamp(δ_0 + η·g/‖g_i‖∞, ±ε)
        loss = λ_s·ℓ_s(f(x + δ), f(x)) + μ·ℓ_s(f(x), f(x; θ̃)).
    ε = 0.3 is large, so the side x + δ (not x − δ, not x) is visible in R_s. Tolerance rel 1e-4: ℓ_s runs in fp32.
    """
    model = make_model().double().eval()
    lam, mu, eps, sigma, eta = 0.7, 0.3, 0.3, 1e-3, 1.0
    smart = SMART(model, lambda_s=lam, epsilon=eps, sigma=sigma, eta=eta, steps=1, mu=mu)
    nudge(model, scale=0.05)
    batch = make_batch(task)
    clean = model(task, batch)
    torch.manual_seed(7)
    got = smart.loss(task, batch, clean).item()
    # the same steps by hand
    x = model.inputs(task, batch).detach()
    torch.manual_seed(7)
    delta0 = (torch.randn_like(x) * sigma).requires_grad_(True)
    (g,) = torch.autograd.grad(torch_sym_kl(task, model(task, batch, embeds=x + delta0), clean.detach()), delta0)
    delta = (delta0.detach() + eta * g / g.abs().amax(dim=(1, 2), keepdim=True)).clamp(-eps, eps)
    with torch.no_grad():
        r_s = torch_sym_kl(task, model(task, batch, embeds=x + delta), clean)
        d_breg = torch_sym_kl(task, clean, smart.teacher(task, batch))
    expected = (lam * r_s + mu * d_breg).item()
    assert r_s > 0 and d_breg > 0, "test setup: both terms should be non-zero"
    assert got == pytest.approx(expected, rel=1e-4), \
        f"minbert.methods.smart.SMART.loss[{task}]: got {got:.8e}, Alg. 1 by hand gives λ_s·R_s + μ·D_Breg = " \
        f"{lam}·{r_s.item():.6e} + {mu}·{d_breg.item():.6e} = {expected:.8e}"


def test_reference_mode_step_is_mt_dnn_raw_gradient_then_per_token_rescale():
    """Oracle: mt-dnn's perturbation written out here (float64, eval mode, a given δ_0):
    δ = δ_0 + η·g with the raw g = ∇_δ ℓ_s, then δ / (max_C |δ| + 1e-6) per token (B, T, 1)."""
    model = make_model().double().eval()
    smart = SMART(model, eta=0.5, mode="reference")
    batch = make_batch("sst")
    with torch.no_grad():
        clean = model("sst", batch)
        x = model.embed(batch)
    delta0 = torch.randn(x.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 1e-2
    got = smart.perturb("sst", batch, x, clean, delta=delta0)
    d = delta0.clone().requires_grad_(True)
    (g,) = torch.autograd.grad(torch_sym_kl("sst", model("sst", batch, embeds=x + d), clean), d)
    step = delta0 + 0.5 * g
    expected = step / (step.abs().amax(-1, keepdim=True) + 1e-6)          # (B, T, C) / (B, T, 1)
    torch.testing.assert_close(got, expected, rtol=1e-6, atol=1e-9,
                               msg=lambda m: f"{PERTURB}[reference]: expected (δ_0 + η·g) / (max_C|·| + 1e-6) per token:\n{m}")


def test_defaults_are_the_papers():
    """Oracle: Jiang et al.'s settings as the module docstring quotes them: λ_s = 1, ε = 1e-5, σ = 1e-5, η = 1e-3,
    one ascent step, μ = 1 (a teacher), paper mode, β = 0.999 from the start when total_steps is unknown (0)."""
    smart = SMART(make_model())
    got = (smart.lambda_s, smart.epsilon, smart.sigma, smart.eta, smart.steps, smart.mu, smart.mode, smart.current_beta)
    assert got == (1.0, 1e-5, 1e-5, 1e-3, 1, 1.0, "paper", 0.999), f"minbert.methods.smart.SMART defaults: {got}"
    assert smart.teacher is not None


def test_mu_zero_means_no_teacher_and_lambda_zero_no_ascent():
    """Oracle: the documented switches ('0 = no teacher' for μ; λ_s = 0 turns R_s off): μ = 0 keeps no teacher (in
    the state too) and its D_Breg is a 0-d zero; λ_s = 0 runs no student forward at all (only the teacher's)."""
    model, batch = make_model().eval(), make_batch("sst")
    clean = model("sst", batch)
    smart = SMART(model, mu=0.0)
    assert smart.teacher is None and smart.state_dict() == {"teacher": None, "updates": 0}, \
        f"minbert.methods.smart.SMART(mu=0): expected no teacher, state {smart.state_dict()}"
    zero = smart.bregman_loss("sst", batch, clean)
    assert zero.shape == () and zero.item() == 0.0, f"{BREG}: without a teacher expected a 0-d zero, got {zero}"
    smart = SMART(model, lambda_s=0.0)
    calls = []
    hook = model.register_forward_hook(lambda *a: calls.append(1))     # the student's forwards, not the teacher's copy
    try:
        smart.loss("sst", batch, clean)
    finally:
        hook.remove()
    assert calls == [], f"minbert.methods.smart.SMART(lambda_s=0).loss: ran the student {len(calls)} times, expected 0"


def test_error_messages_say_what_to_change():
    """Oracle: the documented errors, word for word (mode, frozen encoder, unknown task, state mismatch). The frozen
    check reads only the two attributes, so any model object without PALs and with frozen_encoder=True is refused."""
    from types import SimpleNamespace
    with pytest.raises(ValueError, match=r"^minbert\.methods\.smart\.SMART: mode must be 'paper' or 'reference', got 'mtdnn'$"):
        SMART(make_model(), mode="mtdnn")
    frozen = r"^minbert\.methods\.smart\.SMART: the encoder is frozen \(--option pretrain\), so the ascent cannot " \
             r"differentiate through it; fine-tune the encoder or use R3F$"
    with pytest.raises(ValueError, match=frozen):
        SMART(SimpleNamespace(frozen_encoder=True))
    with pytest.raises(ValueError, match=r"^minbert\.methods\.smart\.divergence: unknown task 'qqp' \(expected sst, para or sts\)$"):
        divergence("qqp", torch.zeros(2, 3), torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"^minbert\.methods\.smart\.SMART\.load_state_dict: the saved state and this SMART "
                                         r"disagree on having a teacher \(mode/mu differ\)$"):
        SMART(make_model(), mu=0.0).load_state_dict(SMART(make_model()).state_dict())


def smart_parser():
    from minbert.methods import smart
    return flags_parser(smart)


def test_flags_defaults_types_and_bounds():
    """Oracle: the flags' contract: SMART off (λ_s = 0), the rest at the paper's values (from SMART's signature);
    λ_s and μ may be 0 or fractional, ε, σ, η must be > 0, at least one ascent step, mode one of two names."""
    args = smart_parser().parse_args([])
    got = (args.smart, args.smart_epsilon, args.smart_sigma, args.smart_eta, args.smart_mu, args.smart_steps, args.smart_mode)
    assert got == (0.0, 1e-5, 1e-5, 1e-3, 1.0, 1, "paper"), f"minbert.methods.smart.add_args defaults: {got}"
    args = smart_parser().parse_args(["--smart", "0.5", "--smart_epsilon", "1e-6", "--smart_sigma", "2e-6", "--smart_eta", "0.01",
                                      "--smart_mu", "0.02", "--smart_steps", "2", "--smart_mode", "reference"])
    got = (args.smart, args.smart_epsilon, args.smart_sigma, args.smart_eta, args.smart_mu, args.smart_steps, args.smart_mode)
    assert got == (0.5, 1e-6, 2e-6, 0.01, 0.02, 2, "reference") and all(isinstance(v, float) for v in got[:5]), \
        f"minbert.methods.smart.add_args: {got}"
    args = smart_parser().parse_args(["--smart", "0", "--smart_mu", "0", "--smart_steps", "1", "--smart_mode", "paper"])
    assert (args.smart, args.smart_mu, args.smart_steps) == (0.0, 0.0, 1)
    for bad in (["--smart", "-1"], ["--smart_mu", "-0.1"], ["--smart_epsilon", "0"], ["--smart_sigma", "0"],
                ["--smart_eta", "0"], ["--smart_steps", "0"], ["--smart_mode", "mtdnn"]):
        with pytest.raises(SystemExit):
            smart_parser().parse_args(bad)


def test_from_args_passes_every_flag():
    """Oracle: the flag -> constructor map written out by hand; --smart 0 builds nothing."""
    from minbert.methods import smart
    model = make_model()
    assert smart.from_args(smart_parser().parse_args([]), model, 100) is None
    built = smart.from_args(smart_parser().parse_args(["--smart", "0.5", "--smart_epsilon", "1e-6", "--smart_sigma", "2e-6",
                                                       "--smart_eta", "0.01", "--smart_mu", "0.02", "--smart_steps", "2",
                                                       "--smart_mode", "paper"]), model, 100)
    got = (built.model, built.lambda_s, built.epsilon, built.sigma, built.eta, built.mu, built.steps, built.total_steps, built.mode)
    assert got == (model, 0.5, 1e-6, 2e-6, 0.01, 0.02, 2, 100, "paper"), f"minbert.methods.smart.from_args: {got[1:]}"
    built = smart.from_args(smart_parser().parse_args(["--smart", "1", "--smart_mode", "reference"]), model, 100)
    assert built.mode == "reference" and built.teacher is None
