"""Grades minbert.methods.pals.PALs and its hooks (BertLayer.forward `extra`, BertModel.encode `layer_extra`).

Oracles: (b) the written-out TS(h) is instructor-only (tests/classroom/test_grader_references_pals.py); (c) properties — zero V_D gives plain BERT
exactly, V_E/V_D shared across layers and attention not, the parameter-count formula,
no gradient leaks between tasks, padding stays inert.
Shape letters as in attention.py, plus S = the PAL width: B batch, T tokens, C hidden, H heads.
"""

import pytest
import torch

from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.methods.pals import PALs, num_parameters_formula
from conftest import flags_parser, refusal

ATOL, RTOL = 1e-5, 1e-5
TASKS = ["sst", "para", "sts"]
SENTENCES = ["The movie was surprisingly good.", "A dull, lifeless plot.", "Meh."]


def tiny(seed=0, S=12, heads=3, zero_init=False):
    torch.manual_seed(seed)
    cfg = BertConfig.tiny(num_hidden_layers=3)
    return BertModel(cfg).eval(), PALs(cfg, TASKS, size=S, heads=heads, zero_init=zero_init).eval()


def batch(B=3, T=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, 30000, (B, T), generator=g)
    am = torch.ones(B, T, dtype=torch.long)
    am[1, 5:] = 0   # second sentence has 3 pads
    am[2, 2:] = 0   # third sentence has 6 pads
    return ids, am


def run(model, pals, task, ids, am):
    """BertModel forward with task's PALs in every layer -> dict with last_hidden_state, pooler_output."""
    return model.encode(model.embed(ids), am, layer_extra=lambda i, h, m: pals(task, i, h, m))


@pytest.fixture(scope="module")
def minilm():
    return BertModel.from_pretrained("minilm-l6").eval(), Tokenizer.from_pretrained("minilm-l6")


# ---------------------------------------------------------------------- shapes and errors

def test_pals_output_shape_is_B_T_C():
    model, pals = tiny()
    B, T, C = 2, 5, model.config.hidden_size
    mask = torch.zeros(B, 1, 1, T)
    out = pals("sst", 0, torch.randn(B, T, C), mask)
    assert out.shape == (B, T, C), f"minbert.methods.pals.PALs.forward: expected (B, T, C) = {(B, T, C)}, got {tuple(out.shape)}"
    with pytest.raises(ValueError, match="PALs.forward: expected h"):
        pals("sst", 0, torch.randn(B, T, C + 1), mask)
    with pytest.raises(KeyError, match="unknown task"):
        pals("nli", 0, torch.randn(B, T, C), mask)
    with pytest.raises(IndexError, match="layer_index"):
        pals("sst", model.config.num_hidden_layers, torch.randn(B, T, C), mask)
    with pytest.raises(ValueError, match="not divisible by heads"):
        PALs(model.config, TASKS, size=204, heads=7)


# ---------------------------------------------------------------------- numerics


def test_zero_init_pals_give_exactly_pretrained_minilm(minilm):
    """Property: V_D = 0 (weights and bias) -> TS = GELU(0) = 0 -> bit-identical outputs (eval)."""
    model, tok = minilm
    pals = PALs(model.config, TASKS, zero_init=True).eval()
    b = tok(SENTENCES)
    with torch.no_grad():
        plain = model(b["input_ids"], b["attention_mask"])
        for task in TASKS:
            ours = run(model, pals, task, b["input_ids"], b["attention_mask"])
            for key in ("last_hidden_state", "pooler_output"):
                d = (ours[key] - plain[key]).abs().max().item()
                assert torch.equal(ours[key], plain[key]), \
                    f"minbert.methods.pals.PALs (zero_init) / BertLayer.forward: {key} changed with V_D = 0 for {task} (max |Δ| = {d:.2e})"


def test_zeroing_V_D_of_random_pals_gives_exactly_plain_bert_and_random_pals_do_not():
    model, pals = tiny()
    ids, am = batch()
    with torch.no_grad():
        plain = model(ids, am)["last_hidden_state"]
        d = (run(model, pals, "sst", ids, am)["last_hidden_state"] - plain).abs().max().item()
        assert d > 1e-4, f"minbert.bert.model.BertModel.encode: random (non-zero) PALs left the output unchanged (max |Δ| = {d:.2e}); is layer_extra used?"
        pals.V_D["sst"].weight.zero_()
        pals.V_D["sst"].bias.zero_()
        ours = run(model, pals, "sst", ids, am)["last_hidden_state"]
    d = (ours - plain).abs().max().item()
    assert torch.equal(ours, plain), f"minbert.methods.pals.PALs.forward: V_D = 0 should give TS(h) = 0 exactly (max |Δ| = {d:.2e})"


# ---------------------------------------------------------------------- structure

def test_V_E_and_V_D_are_shared_across_layers_but_attention_is_per_layer():
    model, pals = tiny()
    L = model.config.num_hidden_layers
    for task in TASKS:
        V_E0, g0, V_D0 = pals.layer(task, 0)
        for i in range(1, L):
            V_E, g, V_D = pals.layer(task, i)
            assert V_E is V_E0 and V_D is V_D0, f"minbert.methods.pals.PALs.layer: V_E/V_D of {task} must be the same module in every layer (layer {i} differs)"
            assert g is not g0, f"minbert.methods.pals.PALs.layer: layer {i} reuses layer 0's attention for {task}"
            assert not torch.equal(g.query.weight, g0.query.weight), f"minbert.methods.pals.PALs: layer {i}'s attention has layer 0's weights for {task}"
    assert pals.layer("sst", 0)[0] is not pals.layer("para", 0)[0], "minbert.methods.pals.PALs: V_E must not be shared between tasks"


@pytest.mark.parametrize("C, L, S, heads", [(32, 3, 12, 3), (384, 6, 204, 12), (768, 12, 204, 6)],
                         ids=["tiny", "minilm", "bert-base-6-heads"])
def test_parameter_count_matches_formula(C, L, S, heads):
    cfg = BertConfig(hidden_size=C, num_hidden_layers=L, num_attention_heads=C // 32)
    pals = PALs(cfg, TASKS, size=S, heads=heads)
    counted = sum(p.numel() for p in pals.parameters())
    expected = num_parameters_formula(C, L, S, len(TASKS))
    assert expected == len(TASKS) * (2 * C * S + C + S + L * 3 * (S * S + S))
    assert counted == expected, f"minbert.methods.pals.PALs: {counted} parameters, formula says {expected} (Δ = {counted - expected})"


# ---------------------------------------------------------------------- training

def test_task_loss_does_not_reach_other_tasks_pals():
    model, pals = tiny()
    model.train(), pals.train()
    ids, am = batch()
    w = torch.randn(model.config.hidden_size, generator=torch.Generator().manual_seed(2))
    loss = (run(model, pals, "sst", ids, am)["last_hidden_state"] @ w).square().mean()
    loss.backward()
    for name, p in pals.named_parameters():
        task = name.split(".")[1]
        if task != "sst":
            assert p.grad is None or not p.grad.any(), f"minbert.methods.pals.PALs.forward: sst loss reached {name} (max |grad| = {p.grad.abs().max():.2e})"
        elif name.endswith("weight"):
            # (key biases are left out: adding q·b_k to every score of a query cancels in the softmax.)
            assert p.grad is not None and p.grad.abs().max() > 0, f"minbert.methods.pals.PALs.forward: no gradient reached {name}"
    assert model.layers[0].interm_dense.weight.grad is not None, "minbert.bert.model.BertModel.encode: BERT got no gradient with PALs on"


def test_frozen_bert_trains_only_pals():
    """The frozen mode: encoder.requires_grad_(False) (not no_grad), so PAL gradients flow through it."""
    model, pals = tiny(zero_init=True)
    model.requires_grad_(False)
    ids, am = batch()
    loss = run(model, pals, "sts", ids, am)["pooler_output"].sum()
    loss.backward()
    assert all(p.grad is None for p in model.parameters()), "frozen BERT parameters received gradients"
    g = pals.V_D["sts"].weight.grad
    assert g is not None and g.abs().max() > 0, "minbert.methods.pals.PALs: zero-init V_D got no gradient (GELU'(0) = 1/2 should let it learn)"


def test_padding_is_inert_with_pals_on(minilm):
    """Property: changing the ids under padding changes nothing at real positions (eval)."""
    model, tok = minilm
    torch.manual_seed(0)
    pals = PALs(model.config, TASKS).eval()      # random init, so the PALs do change the output
    b = tok(SENTENCES)
    ids2 = b["input_ids"].clone()
    pads = b["attention_mask"] == 0
    assert pads.any()
    ids2[pads] = 2023
    with torch.no_grad():
        x = run(model, pals, "sst", b["input_ids"], b["attention_mask"])["last_hidden_state"]
        y = run(model, pals, "sst", ids2, b["attention_mask"])["last_hidden_state"]
    d = (x - y)[~pads].abs().max().item()
    assert d < ATOL, f"minbert.methods.pals.PALs.forward: ids under padding changed real positions (max |Δ| = {d:.2e}); is the mask passed to the PAL attention?"


# ---------------------------------------------------------------------- the graded TS(h) alone

def fast_pals(zero_init=False):
    """PALs whose attention g is the fast path (given code), so grading PALs.forward does not depend
    on assignment 2; no BertModel runs (nor assignments 1 and 3)."""
    torch.manual_seed(0)
    cfg = BertConfig.tiny(num_hidden_layers=2, fast_attention=True)
    return PALs(cfg, TASKS, size=12, heads=3, zero_init=zero_init).eval(), cfg


def hidden(cfg, B=3, T=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    h = torch.randn(B, T, cfg.hidden_size, generator=g)
    _, am = batch(B, T, seed)
    return h, am, (1.0 - am[:, None, None, :].float()) * -10000.0   # (B, T, C), (B, T), (B, 1, 1, T)


def test_pal_term_is_zero_when_V_D_is_zero():
    pals, cfg = fast_pals(zero_init=True)
    h, _, mask = hidden(cfg)
    with torch.no_grad():
        out = pals("sst", 0, h, mask)
    assert torch.equal(out, torch.zeros_like(h)), (
        f"minbert.methods.pals.PALs.forward: with V_D = 0, TS(h) = GELU(0) must be exactly 0, max |TS| = {out.abs().max():.2e}")


def test_pal_term_ignores_padded_keys():
    """Property: changing the padded tokens' vectors changes nothing at real positions."""
    pals, cfg = fast_pals()
    h, am, mask = hidden(cfg)
    h2 = h.clone()
    h2[am == 0] = 10.0
    with torch.no_grad():
        d = (pals("sts", 1, h, mask) - pals("sts", 1, h2, mask))[am.bool()].abs().max().item()
    assert d < ATOL, f"minbert.methods.pals.PALs.forward: changing padded tokens changed real positions (max |Δ| {d:.2e}): pass the mask to g"


# ---------------------------------------------------------------------- PALs after fine-tuning


def fine_tuned_pair(train_heads=False):
    """A 'fine-tuned' MultitaskBert (random encoder + heads) and the same model with zero-init PALs
    added and frozen for the PALs-after-fine-tuning stage (encoder and heads are copies)."""
    import copy
    from minbert.methods.pals import freeze_for_pals_after
    from minbert.tasks.multitask import MultitaskBert
    torch.manual_seed(0)
    cfg = BertConfig.tiny()
    base = MultitaskBert(BertModel(cfg), dropout=0.1)
    after = MultitaskBert(copy.deepcopy(base.encoder), dropout=0.1, frozen_encoder=True,
                          pals=PALs(cfg, TASKS, size=12, heads=3, zero_init=True))
    after.heads.load_state_dict(base.heads.state_dict())
    freeze_for_pals_after(after, train_heads=train_heads)
    return base, after


def task_batch(tok, task):
    if task == "sst":
        return tok(SENTENCES)
    return tok(SENTENCES, ["A fine film.", "Not good at all.", "Okay."])


def test_pals_after_fine_tuning_leave_outputs_unchanged_at_step_0():
    base, after = fine_tuned_pair()
    base.eval(), after.eval()
    tok = Tokenizer.from_pretrained("minilm-l6")
    with torch.no_grad():
        for task in TASKS:
            b = task_batch(tok, task)
            assert torch.equal(base(task, b), after(task, b)), \
                f"minbert.methods.pals.freeze_for_pals_after / PALs(zero_init=True): {task} outputs changed at step 0"


@pytest.mark.parametrize("train_heads", [False, True])
def test_pals_after_fine_tuning_train_only_the_pals(train_heads):
    from minbert.adamw import AdamW
    from minbert.tasks.multitask import task_loss
    base, after = fine_tuned_pair(train_heads)
    before = {k: v.clone() for k, v in after.state_dict().items()}
    tok = Tokenizer.from_pretrained("minilm-l6")
    labels = {"sst": torch.tensor([0, 3, 4]), "para": torch.tensor([1.0, 0.0, 1.0]), "sts": torch.tensor([4.0, 1.0, 2.5])}
    optimizer = AdamW([p for p in after.parameters() if p.requires_grad], lr=1e-2, weight_decay=0.01)
    after.train()
    for _ in range(3):   # three steps: V_D moves first, then V_E and Q/K/V get gradient
        for task in TASKS:
            task_loss(task, after(task, task_batch(tok, task)), labels[task]).backward()
        optimizer.step()
        optimizer.zero_grad()
    changed = {k for k, v in after.state_dict().items() if not torch.equal(v, before[k])}
    allowed = ("pals.", "heads.") if train_heads else ("pals.",)
    assert changed and all(k.startswith(allowed) for k in changed), \
        f"minbert.methods.pals.freeze_for_pals_after(train_heads={train_heads}): only {allowed} may change, changed: {sorted(k for k in changed if not k.startswith(allowed))}"
    for part in ("V_D.sst", "V_E.sst", "attention.sst.0.query"):
        assert any(k.startswith(f"pals.{part}") for k in changed), f"PALs after fine-tuning: pals.{part} did not train"
    assert any(k.startswith("heads.") for k in changed) == train_heads, \
        f"minbert.methods.pals.freeze_for_pals_after(train_heads={train_heads}): heads changed = {not train_heads}"


def test_pals_after_fine_tuning_refuse_pals_that_change_the_outputs():
    from minbert.core.errors import UserError
    from minbert.methods.pals import freeze_for_pals_after
    from minbert.tasks.multitask import MultitaskBert
    cfg = BertConfig.tiny()
    model = MultitaskBert(BertModel(cfg), pals=PALs(cfg, TASKS, size=12, heads=3, zero_init=False))
    with pytest.raises(UserError, match="zero_init"):
        freeze_for_pals_after(model)


def test_freeze_for_pals_after_freezes_the_heads_by_default():
    """Oracle: the documented default (train_heads=False: only the PALs train, Pritsky et al. §3.3.2), read from
    requires_grad of every parameter."""
    from minbert.methods.pals import freeze_for_pals_after
    from minbert.tasks.multitask import MultitaskBert
    torch.manual_seed(0)
    cfg = BertConfig.tiny()
    model = MultitaskBert(BertModel(cfg), pals=PALs(cfg, TASKS, size=12, heads=3, zero_init=True))
    freeze_for_pals_after(model)
    trainable = {n.split(".")[0] for n, p in model.named_parameters() if p.requires_grad}
    assert trainable == {"pals"}, f"minbert.methods.pals.freeze_for_pals_after(model): only the PALs should train, got {trainable}"


def test_freeze_for_pals_after_errors_say_how_to_build_the_pals():
    """Oracle: the documented errors, word for word: no PALs, or PALs whose V_D is not zero."""
    from minbert.core.errors import UserError
    from minbert.methods.pals import freeze_for_pals_after
    from minbert.tasks.multitask import MultitaskBert
    torch.manual_seed(0)
    cfg = BertConfig.tiny()
    with pytest.raises(ValueError, match=r"^minbert\.methods\.pals\.freeze_for_pals_after: the model has no PALs; "
                                         r"build it with pals=PALs\(\.\.\., zero_init=True\)$"):
        freeze_for_pals_after(MultitaskBert(BertModel(cfg)))
    with pytest.raises(UserError, match=r"^minbert\.methods\.pals\.freeze_for_pals_after: V_D is not zero, so the PALs would "
                                        r"change the fine-tuned model's outputs at step 0; build them with zero_init=True "
                                        r"\(--pals_init zero\)$"):
        freeze_for_pals_after(MultitaskBert(BertModel(cfg), pals=PALs(cfg, TASKS, size=12, heads=3, zero_init=False)))


def test_default_init_is_the_reference_random_one():
    """Oracle: Stickland & Murray's reference code initialises V_D like every BERT Linear, N(0, 0.02²), not zero
    (zero_init is this codebase's opt-in): 32·12 = 384 draws, sample std within [0.016, 0.024]."""
    torch.manual_seed(0)
    pals = PALs(BertConfig.tiny(), TASKS, size=12, heads=3)
    std = pals.V_D["sst"].weight.std().item()
    assert 0.016 < std < 0.024, f"minbert.methods.pals.PALs(zero_init default): V_D weight std {std:.4f}, expected ~0.02"


def pals_parser():
    from minbert.methods import pals
    return flags_parser(pals)


def test_flags_defaults_types_and_bounds():
    """Oracle: the flags' contract: off, the paper's d_s = 204 with BERT's 12 heads, random init (the reference's);
    1 is the smallest size/head count, 0 stops at parse time."""
    args = pals_parser().parse_args([])
    assert (args.pals, args.pals_size, args.pals_heads, args.pals_init) == (False, 204, 12, "random"), \
        f"minbert.methods.pals.add_args defaults: {args}"
    args = pals_parser().parse_args(["--pals", "--pals_size", "132", "--pals_heads", "6", "--pals_init", "zero"])
    assert (args.pals, args.pals_size, args.pals_heads, args.pals_init) == (True, 132, 6, "zero"), f"minbert.methods.pals.add_args: {args}"
    args = pals_parser().parse_args(["--pals_size", "1", "--pals_heads", "1", "--pals_init", "random"])
    assert (args.pals_size, args.pals_heads) == (1, 1)
    for bad in (["--pals_size", "0"], ["--pals_heads", "0"], ["--pals_init", "normal"], ["--pals", "1"]):
        with pytest.raises(SystemExit):
            pals_parser().parse_args(bad)


@pytest.mark.parametrize("argv, error", [
    ([], None), (["--pals"], None), (["--pals", "--pals_size", "132", "--pals_heads", "6"], None),
    (["--pals_size", "205"], None),                                  # PALs off: the size is not used
    (["--pals", "--pals_heads", "7"], "--pals_size 204 must be divisible by --pals_heads 7"),
])
def test_check_args_needs_heads_that_divide_the_size(argv, error, capsys):
    """Oracle: S / H must be a whole head width (204 = 12 × 17)."""
    from minbert.methods import pals
    said = refusal(pals, pals_parser(), argv, capsys)
    assert (said is None if error is None else f": error: {error}\n" in (said or "")), \
        f"minbert.methods.pals.check_args({argv}): expected {error!r}, got {said!r}"


def test_from_args_builds_the_pals_the_flags_describe():
    """Oracle: the flag -> constructor map by hand: tasks, S, H, zero V_D only with --pals_init zero."""
    from minbert.methods import pals
    cfg = BertConfig.tiny()
    assert pals.from_args(pals_parser().parse_args(["--pals_size", "12"]), cfg, TASKS) is None
    for init in ("zero", "random"):
        built = pals.from_args(pals_parser().parse_args(["--pals", "--pals_size", "12", "--pals_heads", "4", "--pals_init", init]),
                               cfg, ["sst", "sts"])
        assert (built.tasks, built.size, built.hidden_size, built.attention["sst"][0].num_heads) == (["sst", "sts"], 12, 32, 4), \
            f"minbert.methods.pals.from_args: built PALs for {built.tasks}, S={built.size}, H={built.attention['sst'][0].num_heads}"
        assert (not built.V_D["sst"].weight.any()) == (init == "zero"), \
            f"minbert.methods.pals.from_args(--pals_init {init}): V_D zero = {not built.V_D['sst'].weight.any()}"
