"""Head variants of the CS224N reports in minbert/tasks/multitask.py (make_head) and pair_heads.py.

Oracles: definition (the layer lists the CS224N reports describe), hand computation on a tiny
random BERT (BertConfig.tiny), and properties (output shapes per task).
Run: python -m pytest -q tests/tasks/test_head_variants.py   (offline, CPU, a few seconds)
"""

import pytest
import torch
from torch import nn

from minbert.tasks.multitask import make_head
from minbert.tasks.pair_heads import ConcatHead, DotHead, TanhScaledHead
from conftest import tiny_multitask

C = 8


def kinds(head):
    return [type(m) for m in head]


def test_default_mlp_head_is_unchanged():
    """Oracle: definition. hidden_layers=1, GELU: Dropout -> Linear(C, C) -> GELU -> Dropout -> Linear(C, out),
    the original minbert head (so old checkpoints keep their parameter names heads.<t>.1 and .4)."""
    head = make_head("mlp", C, 5, 0.1)
    assert kinds(head) == [nn.Dropout, nn.Linear, nn.GELU, nn.Dropout, nn.Linear], f"make_head('mlp'): {kinds(head)}"


def test_song_hu_pan_head_has_two_hidden_gelu_layers():
    """Oracle: definition (Song, Hu & Pan §3.1: two feed-forward layers of width 768 with GELU, then a
    linear output layer)."""
    head = make_head("mlp", C, 5, 0.1, hidden_layers=2)
    assert kinds(head) == [nn.Dropout, nn.Linear, nn.GELU, nn.Dropout, nn.Linear, nn.GELU, nn.Dropout, nn.Linear], \
        f"minbert.tasks.multitask.make_head(hidden_layers=2): got {kinds(head)}"
    shapes = [tuple(m.weight.shape) for m in head if isinstance(m, nn.Linear)]
    assert shapes == [(C, C), (C, C), (5, C)], f"make_head(hidden_layers=2): Linear shapes {shapes}"


def test_pritsky_head_uses_relu():
    """Oracle: definition (Pritsky et al. §3.3.3: fully connected layers with dropout and a ReLU; best with one
    hidden layer of width 768)."""
    head = make_head("mlp", C, 1, 0.1, activation="relu")
    assert kinds(head) == [nn.Dropout, nn.Linear, nn.ReLU, nn.Dropout, nn.Linear], f"make_head(activation='relu'): {kinds(head)}"
    with pytest.raises(ValueError, match="activation"):
        make_head("mlp", C, 1, 0.1, activation="tanh")
    with pytest.raises(ValueError, match="hidden_layers"):
        make_head("mlp", C, 1, 0.1, hidden_layers=0)


def test_make_head_reads_c_in_inputs():
    """Oracle: property. C_in = 2C for the concatenation head: (B, 2C) -> (B, out)."""
    for kind in ("linear", "mlp"):
        head = make_head(kind, C, 3, 0.0, C_in=2 * C, hidden_layers=2)
        assert head(torch.randn(4, 2 * C)).shape == (4, 3), f"make_head({kind!r}, C_in=2C): wrong output shape"


def batch(B=3, T=5, pair=False):
    g = torch.Generator().manual_seed(1)
    ids = lambda: torch.randint(5, 90, (B, T), generator=g)
    b = {"input_ids": ids(), "token_type_ids": torch.zeros(B, T, dtype=torch.long), "attention_mask": torch.ones(B, T, dtype=torch.long)}
    if pair:
        b |= {"input_ids_b": ids(), "token_type_ids_b": torch.zeros(B, T, dtype=torch.long), "attention_mask_b": torch.ones(B, T, dtype=torch.long)}
    return b


@pytest.mark.parametrize("kind", ["dot", "concat"])
def test_bi_encoder_dot_and_concat_heads_compute_their_formula(kind):
    """Oracle: hand formula on the model's own pooled vectors u, v: dot -> u · v; concat -> W[u; v] + b."""
    model = tiny_multitask(pair_heads={"para": kind, "sts": kind}, head="linear").eval()
    assert model.bi_encoder("sts"), f"MultitaskBert: pair head {kind!r} must encode the two sentences separately"
    b = batch(pair=True)
    with torch.no_grad():
        u, v = model.features("sts", b)
        out = model("sts", b)
        if kind == "dot":
            expected = (u * v).sum(-1)
        else:
            lin = model.heads["sts"].head[1]
            expected = (torch.cat([u, v], -1) @ lin.weight.T + lin.bias).squeeze(-1)
    assert isinstance(model.heads["sts"], DotHead if kind == "dot" else ConcatHead)
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-5, msg=f"MultitaskBert pair head {kind!r}")
    assert model("para", b).shape == (3,), f"MultitaskBert pair head {kind!r}: para must return one logit per pair"


def test_cross_tanh_is_a_bounded_cross_encoder_for_sts_only():
    """Oracle: property (Benton §4.2). STS output lies in (0, 5); the model reads one joint sequence; para rejects it."""
    model = tiny_multitask(pair_heads={"sts": "cross_tanh"}, head="mlp", head_layers=2).eval()
    assert not model.bi_encoder("sts") and isinstance(model.heads["sts"], TanhScaledHead)
    with torch.no_grad():
        out = model("sts", batch())
    assert out.shape == (3,) and ((out > 0) & (out < 5)).all(), f"cross_tanh STS scores must lie in (0, 5), got {out}"
    with pytest.raises(ValueError, match="pair head for para"):
        tiny_multitask(pair_heads={"para": "cross_tanh"}).eval()


def test_head_layers_and_activation_reach_every_cross_head():
    """Oracle: definition. --head mlp --head_layers 2 --head_activation relu builds that MLP for sst, para and sts."""
    model = tiny_multitask(head="mlp", head_layers=2, head_activation="relu").eval()
    for t in ("sst", "para", "sts"):
        assert sum(isinstance(m, nn.ReLU) for m in model.heads[t]) == 2, f"MultitaskBert head {t}: expected 2 ReLU layers"


def test_gradvac_layer_groups_follow_the_transformer_layers():
    """Oracle: definition (Wang et al.'s per-layer granularity). A 2-layer model gives 5 groups, in order:
    embeddings, layer 0, layer 1, pooler, heads; each parameter in exactly one, by its name."""
    from minbert.tasks.multitask import gradvac_groups
    model = tiny_multitask().eval()
    named = list(model.named_parameters())
    params = [p for _, p in named]
    groups = gradvac_groups(model, params, "layer")
    prefixes = ["encoder.embeddings.", "encoder.layers.0.", "encoder.layers.1.", "encoder.pooler.", "heads."]
    assert len(groups) == 5, f"minbert.tasks.multitask.gradvac_groups('layer'): expected 5 groups, got {len(groups)}"
    for prefix, group in zip(prefixes, groups):
        expected = [i for i, (n, _) in enumerate(named) if n.startswith(prefix)]
        assert group == expected, f"gradvac_groups('layer'): group {prefix}* holds {group}, expected {expected}"
    assert gradvac_groups(model, params, "model") is None
    assert gradvac_groups(model, params, "matrix") == [[i] for i in range(len(params))]
