"""Tests for minbert/methods/r3f.py: the R3F noise-consistency term and R4F's spectrally normalised heads.

Run: python -m pytest -q tests/methods/test_r3f.py   (offline, CPU, tiny model, a few seconds)
Oracles: (b) torch.linalg.matrix_norm for the spectral norm; (c) properties: symmetry, zero
without noise or dropout, no gradient into the word-embedding table, no term for regression.
"""

import pytest
import torch

from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.methods.r3f import R3F, spectral_norm_heads
from minbert.methods.smart import SMART, divergence
from minbert.tasks.multitask import MultitaskBert, task_loss
from conftest import flags_parser, refusal, make_batch, tiny_multitask

LOSS = "minbert.methods.r3f.R3F.loss"
R4F = "minbert.methods.r3f.spectral_norm_heads"


@pytest.mark.parametrize("noise", ["uniform", "normal"])
@pytest.mark.parametrize("task", ["sst", "para"])
def test_r3f_is_symmetric_positive_and_scaled_by_lambda(task, noise):
    """property: with the same noise draw (same seed), λ·KL_S(clean, noisy) equals λ·KL_S(noisy, clean)
    (atol 1e-9), is > 0 for both head types in train mode, and doubles with λ (rtol 1e-6)."""
    model, batch = tiny_multitask().train(), make_batch(task)
    clean = model(task, batch)

    def noisy_out():
        torch.manual_seed(1)    # the same z and dropout masks as the R3F call below
        with torch.no_grad():
            words = model.encoder.embeddings.word_embedding(batch["input_ids"])
        z = torch.empty_like(words).uniform_(-1e-5, 1e-5) if noise == "uniform" else torch.randn_like(words) * 1e-5
        return model(task, batch, word_embeds=words + z)

    torch.manual_seed(1)
    one = R3F(model, lambda_=1.0, noise=noise).loss(task, batch, clean).item()
    torch.manual_seed(1)
    two = R3F(model, lambda_=2.0, noise=noise).loss(task, batch, clean).item()
    forward = divergence(task, clean, noisy_out()).item()
    backward = divergence(task, noisy_out(), clean).item()
    assert one > 0, f"{LOSS}[{task}, {noise}]: {one:.3e}, expected > 0 (dropout differs between the passes)"
    assert abs(forward - backward) <= 1e-9 and abs(one - forward) <= 1e-9, (
        f"{LOSS}[{task}]: R3F {one:.6e}, KL_S(clean, noisy) {forward:.6e}, KL_S(noisy, clean) {backward:.6e}")
    assert abs(two - 2 * one) <= 1e-6 * two, f"{LOSS}[{task}]: λ=2 gives {two:.6e}, expected 2 × {one:.6e}"


@pytest.mark.parametrize("task", ["sst", "para"])
def test_r3f_is_zero_without_noise_or_dropout(task):
    """property: ε = 0 in eval mode: the noisy pass is the clean pass, so the term is exactly 0 (tol 0)."""
    model, batch = tiny_multitask().eval(), make_batch(task)
    loss = R3F(model, epsilon=0.0).loss(task, batch, model(task, batch)).item()
    assert loss == 0.0, f"{LOSS}[{task}]: {loss:.3e} with ε = 0 and dropout off, expected 0"


def test_r3f_is_zero_for_regression():
    """property: 'sts' gets no R3F term (fairseq): a zero fp32 scalar, no extra forward needed."""
    model, batch = tiny_multitask().train(), make_batch("sts")
    loss = R3F(model).loss("sts", batch, model("sts", batch))
    assert loss.shape == () and loss.item() == 0.0, f"{LOSS}[sts]: {loss}, expected a zero scalar"


@pytest.mark.parametrize("task", ["sst", "para"])
def test_gradient_flows_into_the_clean_side_too(task):
    """property (fairseq): neither side of KL_S is detached: the clean output, passed as a leaf
    that requires grad, receives a non-zero gradient from the R3F term."""
    model, batch = tiny_multitask().train(), make_batch(task)
    clean = model(task, batch).detach().requires_grad_(True)
    R3F(model, epsilon=1e-2).loss(task, batch, clean).backward()
    assert clean.grad is not None and clean.grad.abs().max() > 0, f"{LOSS}[{task}]: the clean side is detached"


@pytest.mark.parametrize("task", ["sst", "para"])
def test_noisy_branch_gives_no_gradient_to_the_word_embedding_table(task):
    """property: the R3F term alone, with the clean output detached, gives word_embedding.weight
    no gradient (None or all zeros), while the rest of the encoder (positions, layers) gets one."""
    model, batch = tiny_multitask().train(), make_batch(task)
    with torch.no_grad():
        clean = model(task, batch)
    R3F(model, epsilon=1e-2).loss(task, batch, clean).backward()
    table = model.encoder.embeddings.word_embedding.weight.grad
    assert table is None or table.abs().max().item() == 0.0, (
        f"{LOSS}[{task}]: the noisy branch sent a gradient into the word-embedding table, "
        f"max |grad| = {table.abs().max().item():.3e} (detach the looked-up embeddings)")
    for name in ("encoder.embeddings.pos_embedding.weight", "encoder.layers.0.self_attention.query.weight"):
        grad = model.get_parameter(name).grad
        assert grad is not None and grad.abs().max() > 0, f"{LOSS}[{task}]: no gradient reached {name}"


@pytest.mark.parametrize("head", ["linear", "mlp"])
def test_r4f_head_has_unit_spectral_norm_after_training_forwards(head):
    """oracle (b): torch.linalg.matrix_norm(W, 2) of each head's final Linear is 1 ± 0.05 after 20
    train-mode steps (forward + backward + SGD) with R3F; an 'mlp' head's hidden Linear stays free."""
    model = tiny_multitask(head=head).train()
    spectral_norm_heads(model)
    spectral_norm_heads(model)                       # idempotent: one parametrization, not two
    r3f, opt = R3F(model), torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(20):
        task = ["sst", "para", "sts"][step % 3]
        batch = make_batch(task, seed=step)
        out = model(task, batch)
        (task_loss(task, out, batch["labels"]) + r3f.loss(task, batch, out)).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    with torch.no_grad():                            # one more power iteration on the final weights
        for task in model.heads:
            model(task, make_batch(task))
    model.eval()
    for task, seq in model.heads.items():
        final = [m for m in seq if isinstance(m, torch.nn.Linear)][-1]
        assert len(final.parametrizations.weight) == 1, f"{R4F}: {task} head normalised twice"
        sigma = torch.linalg.matrix_norm(final.weight.detach(), 2).item()
        assert abs(sigma - 1.0) <= 0.05, f"{R4F}: {task} head's largest singular value {sigma:.4f}, expected 1 ± 0.05"
        if head == "mlp":
            hidden = [m for m in seq if isinstance(m, torch.nn.Linear)][0]
            assert not hasattr(hidden, "parametrizations"), f"{R4F}: the {task} head's hidden Linear was normalised"


def test_r4f_finds_the_final_linear_of_a_siamese_head_and_rejects_a_cosine_head():
    """property: the siamese head (Linear(4C, C) -> GELU -> Dropout -> Linear(C, out)) gets its LAST
    Linear normalised; a parameter-free cosine head raises a ValueError naming the head."""
    torch.manual_seed(0)
    model = MultitaskBert(BertModel(BertConfig.tiny()), pair_heads={"para": "siamese", "sts": "cosine"})
    spectral_norm_heads(model, tasks=("sst", "para"))
    linears = [m for m in model.heads["para"].modules() if isinstance(m, torch.nn.Linear)]
    assert hasattr(linears[-1], "parametrizations") and not hasattr(linears[0], "parametrizations"), (
        f"{R4F}: expected only the siamese head's final Linear to be normalised")
    with pytest.raises(ValueError, match="sts head"):
        spectral_norm_heads(model, tasks=("sts",))


def test_smart_teacher_follows_a_model_with_r4f_heads():
    """property: SMART's deep-copied teacher works on a spectrally normalised model; β = 0 copies
    the student's weights and power-iteration buffers (tol 0)."""
    model = tiny_multitask().train()
    spectral_norm_heads(model)
    smart = SMART(model, beta=(0.0, 0.0))
    batch = make_batch("sst")
    out = model("sst", batch)
    (task_loss("sst", out, batch["labels"]) + smart.loss("sst", batch, out)).backward()
    with torch.no_grad():
        for p in model.parameters():
            if p.grad is not None:
                p.sub_(0.1 * p.grad)
    smart.update_teacher()
    teacher = smart.teacher.state_dict()
    diff = max((v - teacher[k]).abs().max().item() for k, v in model.state_dict().items())
    assert diff == 0.0, f"minbert.methods.smart.SMART.update_teacher: teacher differs from the R4F student by {diff:.2e}"


def test_default_lambda_is_one_and_bad_noise_names_the_choices():
    """Oracle: the documented defaults (the --r3f help quotes the paper's λ = 1, ε = 1e-5, uniform noise):
    R3F(model) gives exactly 1·KL_S of the same draws; an unknown noise raises naming both choices."""
    model, batch = tiny_multitask().train(), make_batch("sst")
    clean = model("sst", batch)
    torch.manual_seed(1)
    default = R3F(model).loss("sst", batch, clean).item()
    torch.manual_seed(1)
    one = R3F(model, lambda_=1.0, epsilon=1e-5, noise="uniform").loss("sst", batch, clean).item()
    assert default == one > 0, f"{LOSS}: R3F(model) gave {default:.6e}, λ=1, ε=1e-5, uniform gave {one:.6e}"
    with pytest.raises(ValueError, match=r"^minbert\.methods\.r3f\.R3F: noise must be 'uniform' or 'normal', got 'gauss'$"):
        R3F(model, noise="gauss")


def test_cosine_head_error_says_to_leave_it_out():
    """Oracle: the documented error (a head without a Linear cannot be spectrally normalised)."""
    torch.manual_seed(0)
    model = MultitaskBert(BertModel(BertConfig.tiny()), pair_heads={"sts": "cosine"})
    with pytest.raises(ValueError, match=r"^minbert\.methods\.r3f\.spectral_norm_heads: the sts head has no Linear layer "
                                         r"\(a parameter-free cosine head\?\); leave it out of `tasks`$"):
        spectral_norm_heads(model, tasks=("sts",))


def r3f_parser():
    from minbert.methods import r3f
    from minbert.tasks import multitask
    return flags_parser(multitask, r3f)


def test_flags_defaults_types_and_bounds():
    """Oracle: the flags' contract: R3F off (λ = 0), ε = 1e-5, uniform noise (fairseq's defaults), R4F off;
    λ may be 0 but not negative, ε must be > 0, the noise one of two names."""
    args = r3f_parser().parse_args([])
    assert (args.r3f, args.r3f_epsilon, args.r3f_noise, args.r4f) == (0.0, 1e-5, "uniform", False), \
        f"minbert.methods.r3f.add_args defaults: {args}"
    args = r3f_parser().parse_args(["--r3f", "0.5", "--r3f_epsilon", "0.001", "--r3f_noise", "normal", "--r4f"])
    assert (args.r3f, args.r3f_epsilon, args.r3f_noise, args.r4f) == (0.5, 1e-3, "normal", True) \
        and isinstance(args.r3f, float) and isinstance(args.r3f_epsilon, float), f"minbert.methods.r3f.add_args: {args}"
    assert r3f_parser().parse_args(["--r3f", "0", "--r3f_noise", "uniform"]).r3f == 0.0
    for bad in (["--r3f", "-0.1"], ["--r3f_epsilon", "0"], ["--r3f_noise", "gauss"], ["--r4f", "1"]):
        with pytest.raises(SystemExit):
            r3f_parser().parse_args(bad)


@pytest.mark.parametrize("argv, ok", [
    ([], True), (["--para_head", "cosine"], True),                          # off: any pair head
    (["--r3f", "1"], True), (["--r3f", "1", "--r4f"], True),
    (["--r3f", "1", "--sts_head", "cross_tanh"], True),                     # both cross-encoders
    (["--r3f", "1", "--para_head", "cosine"], False), (["--r3f", "1", "--r4f", "--sts_head", "siamese"], False),
    (["--r3f", "1", "--r4f", "--para_head", "concat"], False),
])
def test_check_args_needs_cross_encoder_pair_heads(argv, ok, capsys):
    """Oracle: the rule (the noise goes on ONE input sequence, so a bi-encoder pair has nothing to perturb as one)."""
    from minbert.methods import r3f
    said = refusal(r3f, r3f_parser(), argv, capsys)
    error = ": error: --r3f/--r4f perturb one input sequence, so they need cross-encoder pair heads\n"
    assert (said is None if ok else error in (said or "")), f"minbert.methods.r3f.check_args({argv}): got {said!r}"


def test_r4f_without_r3f_is_refused_not_a_silent_lambda_0(capsys):
    """R4F is R3F with spectrally normalised heads (Aghajanyan et al. 2020, the R3F/R4F objectives of its method
    section): --r4f alone used to build an R3F
    with λ = 0, paying the noisy forward pass for a term weighted 0."""
    from minbert.methods import r3f
    p = r3f_parser()
    with pytest.raises(SystemExit):
        r3f.check_args(p.parse_args(["--r4f"]), p)
    assert "--r4f is R3F plus spectral norm on the heads: give R3F's weight too" in capsys.readouterr().err


def test_from_args_builds_r3f_and_normalises_heads_only_when_asked():
    """Oracle: the flag -> object map written out by hand; R4F = spectral norm on every head's final Linear."""
    from minbert.methods import r3f
    from torch.nn.utils.parametrize import is_parametrized

    def final_linears(model):
        return [[m for m in model.heads[t].modules() if isinstance(m, torch.nn.Linear)][-1] for t in ("sst", "para", "sts")]
    model = tiny_multitask()
    assert r3f.from_args(r3f_parser().parse_args([]), model) is None
    built = r3f.from_args(r3f_parser().parse_args(["--r3f", "0.5", "--r3f_epsilon", "0.01", "--r3f_noise", "normal"]), model)
    assert (built.model, built.lambda_, built.epsilon, built.noise) == (model, 0.5, 0.01, "normal"), \
        f"minbert.methods.r3f.from_args: flags not passed: {vars(built)}"
    assert not any(is_parametrized(m) for m in final_linears(model)), "minbert.methods.r3f.from_args: --r3f alone must not normalise heads"
    built = r3f.from_args(r3f_parser().parse_args(["--r3f", "1", "--r4f"]), model)
    assert built is not None and built.model is model, "minbert.methods.r3f.from_args: --r4f must return an R3F"
    assert all(is_parametrized(m, "weight") for m in final_linears(model)), \
        "minbert.methods.r3f.from_args: --r4f must spectral-normalise every head's final Linear"
