"""Grades minbert.bert.layers.Embeddings and minbert.bert.layers.BertLayer (assignments 1 and 3).

Oracle (a), stored: tests/fixtures/bert_tiny_reference.npz, the outputs of Hugging Face's BertModel
for a tiny random BERT (made by tests/fixtures/make_reference.py, checked against live HF by
tests/classroom/test_reference_fixtures.py), so these tests need no `transformers`. The layer's written-out
reference (oracle b) is instructor-only: tests/classroom/test_grader_references_layers.py.
The layer runs with fast_attention=True (F.scaled_dot_product_attention, given code), so the
layer's grade does not depend on assignment 2. Compared in fp32, eval mode, atol 1e-5, and only
at real (non-padded) positions where the spec defines only those.
Shapes: B batch, T tokens, C hidden (attention.py's letters).
"""

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from minbert.bert.attention import extended_attention_mask
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel

ATOL, RTOL = 1e-5, 1e-4
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "bert_tiny_reference.npz"
EMB, LAYER = "minbert.bert.layers.Embeddings.forward", "minbert.bert.layers.BertLayer.forward"


def reference():
    """The stored tensors, and a BertModel (fast attention, eval) holding the stored weights."""
    with np.load(FIXTURE) as f:
        ref = {k: torch.from_numpy(f[k]) for k in f.files if k != "config"}
        config = BertConfig(**json.loads(str(f["config"])), fast_attention=True)
    model = BertModel(config).eval()
    model.load_state_dict({k.removeprefix("weights."): v for k, v in ref.items() if k.startswith("weights.")})
    return ref, model


def max_diff(a, b):
    return (a - b).abs().max().item()


def hint(got, candidates):
    """The first usual mistake whose output equals `got`, as ' (hint: ...)', else ''."""
    for text, value in candidates:
        if value.shape == got.shape and max_diff(got, value) <= ATOL:
            return f" (hint: {text})"
    return ""


# ---------------------------------------------------------------------- assignment 1: embeddings

def test_embeddings_output_shape_is_B_T_C():
    ref, model = reference()
    with torch.no_grad():
        out = model.embeddings(ref["input_ids"], ref["token_type_ids"])
    assert out.shape == ref["embeddings"].shape, f"{EMB}: expected (B, T, C) = {tuple(ref['embeddings'].shape)}, got {tuple(out.shape)}"


def embedding_mistakes(model, ids, types):
    """Outputs of the usual mistakes, computed from the same weights."""
    e = model.embeddings
    word, pos, typ = e.word_embedding(ids), e.pos_embedding(torch.arange(ids.shape[1])), e.tk_type_embedding(types)
    ln = lambda x: F.layer_norm(x, (x.shape[-1],), e.layer_norm.weight, e.layer_norm.bias, e.layer_norm.eps)
    return [("token_type_ids are ignored: add tk_type_embedding(token_type_ids)", ln(word + pos)),
            ("the position embeddings are missing: add pos_embedding(arange(T))", ln(word + typ)),
            ("LayerNorm is missing after the sum", word + pos + typ),
            ("LayerNorm must come after the sum of all three embeddings", ln(word) + pos + typ)]


def test_embeddings_match_stored_reference_without_token_types():
    """token_type_ids=None means segment A (type 0) everywhere."""
    ref, model = reference()
    with torch.no_grad():
        out = model.embeddings(ref["input_ids"])
        mistakes = embedding_mistakes(model, ref["input_ids"], torch.zeros_like(ref["input_ids"]))
    torch.testing.assert_close(out, ref["embeddings_no_types"], atol=ATOL, rtol=RTOL, msg=lambda m:
        f"{EMB}(input_ids) differs from the stored HF embeddings (max |Δ| {max_diff(out, ref['embeddings_no_types']):.2e})"
        + hint(out, [("token_type_ids=None means type 0 everywhere: still add tk_type_embedding of zeros",
                      mistakes[0][1])] + mistakes[1:]) + f"\n{m}")


def test_embeddings_match_stored_reference_with_token_types():
    ref, model = reference()
    with torch.no_grad():
        out = model.embeddings(ref["input_ids"], ref["token_type_ids"])
        mistakes = embedding_mistakes(model, ref["input_ids"], ref["token_type_ids"])
    torch.testing.assert_close(out, ref["embeddings"], atol=ATOL, rtol=RTOL, msg=lambda m:
        f"{EMB}(input_ids, token_type_ids) differs from the stored HF embeddings "
        f"(max |Δ| {max_diff(out, ref['embeddings']):.2e})" + hint(out, mistakes) + f"\n{m}")


def test_embeddings_dropout_only_in_training():
    ref, model = reference()
    emb = BertModel(BertConfig(**{**model.config.__dict__, "hidden_dropout_prob": 0.5})).embeddings
    emb.load_state_dict(model.embeddings.state_dict())
    ids, types = ref["input_ids"], ref["token_type_ids"]
    with torch.no_grad():
        e1, e2 = emb.eval()(ids, types), emb(ids, types)
        t1, t2 = emb.train()(ids, types), emb(ids, types)
    assert torch.equal(e1, e2), f"{EMB}: eval mode must be deterministic (no dropout)"
    assert not torch.equal(t1, t2), f"{EMB}: train mode must apply self.dropout after the LayerNorm"
    zeros = (t1 == 0).float().mean().item()
    assert 0.3 < zeros < 0.7, f"{EMB}: with hidden_dropout_prob 0.5 about half the entries should be 0, got {zeros:.0%}"


# ---------------------------------------------------------------------- assignment 3: the layer

def test_bert_layer_matches_stored_hf_output():
    """Stored case: layer 0 of the tiny HF BERT on the stored embeddings, at real positions."""
    ref, model = reference()
    layer, real = model.layers[0], ref["attention_mask"].bool()
    mask = extended_attention_mask(ref["attention_mask"], torch.float32)         # (B, 1, 1, T)
    with torch.no_grad():
        out = layer(ref["embeddings"], mask)
    assert out.shape == ref["embeddings"].shape, f"{LAYER}: expected (B, T, C), got {tuple(out.shape)}"
    torch.testing.assert_close(out[real], ref["hidden_1"][real], atol=ATOL, rtol=RTOL, msg=lambda m:
        f"{LAYER} differs from the stored HF layer output at real positions "
        f"(max |Δ| {max_diff(out[real], ref['hidden_1'][real]):.2e}): post-LN add & norm twice, exact GELU\n{m}")


def test_bert_layer_adds_the_pal_term_inside_the_second_layer_norm():
    """PALs (Stickland & Murray 2019, arXiv 1902.02671, Sec. 3): the task term joins the second residual
    sum *before* LayerNorm 2: h' = LN2(a + FFN(a) + TS(h)), a = LN1(h + SA(h)). Oracle (b): that equation
    written out here with torch's functionals (F.scaled_dot_product_attention, F.layer_norm, F.gelu) on the
    layer's own weights; a term added after LN2, or into the attention residual, misses it."""
    torch.manual_seed(0)
    cfg = BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    layer = BertModel(cfg).layers[0].eval()
    B, T, C, H = 2, 6, cfg.hidden_size, cfg.num_attention_heads
    g = torch.Generator().manual_seed(3)
    h, extra = torch.randn(B, T, C, generator=g), torch.randn(B, T, C, generator=g) * 3
    am = torch.ones(B, T, dtype=torch.long)
    am[1, 4:] = 0
    sa = layer.self_attention

    def heads(x):   # (B, T, C) -> (B, H, T, D)
        return x.view(B, T, H, C // H).transpose(1, 2)

    keep = am[:, None, None, :].bool()                                           # (B, 1, 1, T)
    att = F.scaled_dot_product_attention(heads(F.linear(h, sa.query.weight, sa.query.bias)),
                                         heads(F.linear(h, sa.key.weight, sa.key.bias)),
                                         heads(F.linear(h, sa.value.weight, sa.value.bias)), attn_mask=keep)
    att = att.transpose(1, 2).reshape(B, T, C)                                   # (B, T, C)
    ln1, ln2 = layer.attention_layer_norm, layer.out_layer_norm
    a = F.layer_norm(h + layer.attention_dense(att), (C,), ln1.weight, ln1.bias, ln1.eps)
    ffn = layer.out_dense(F.gelu(layer.interm_dense(a)))
    want = F.layer_norm(a + ffn + extra, (C,), ln2.weight, ln2.bias, ln2.eps)
    with torch.no_grad():
        got = layer(h, extended_attention_mask(am, h.dtype), extra)
    real = am.bool()   # compare real tokens only: a padded query's output is not defined by the spec
    diff = (got - want)[real].abs().max().item()
    assert diff < 1e-5, (f"minbert.bert.layers.BertLayer.forward with extra: max abs diff {diff:.3g} from "
                         "LN2(a + FFN(a) + extra): the PAL term goes into the second residual sum, before LayerNorm 2 "
                         "(not after it, not into the attention residual)")


# ---------------------------------------------------------------------- edges (written for mutation survivors)

def test_embeddings_take_exactly_max_position_embeddings_tokens_and_refuse_one_more():
    """The position table has rows 0..P-1: T = P tokens fit (the last uses row P-1), T = P + 1 cannot."""
    ref, model = reference()
    P = model.config.max_position_embeddings
    ids = torch.ones(1, P + 1, dtype=torch.long)
    with torch.no_grad():
        out = model.embeddings(ids[:, :P])
    assert out.shape == (1, P, model.config.hidden_size), f"{EMB}: T = max_position_embeddings = {P} must fit"
    try:
        model.embeddings(ids)
    except ValueError as e:
        assert f"{P + 1}" in str(e) and f"max_position_embeddings {P}" in str(e), \
            f"{EMB}: the error must name the length {P + 1} and max_position_embeddings {P}, got {e}"
    else:
        raise AssertionError(f"{EMB}: T = {P + 1} > max_position_embeddings = {P} must raise ValueError")


def test_pad_row_of_the_word_embedding_starts_at_zero_and_gets_no_gradient():
    """As Hugging Face's BertEmbeddings (nn.Embedding(..., padding_idx=pad_token_id)): the [PAD] row is 0
    after init and torch gives it no gradient, so padding never moves it. Checked with pad_token_id 3."""
    torch.manual_seed(0)
    cfg = BertConfig.tiny(pad_token_id=3, hidden_dropout_prob=0.0)
    emb = BertModel(cfg).embeddings
    w = emb.word_embedding.weight
    assert torch.equal(w[3], torch.zeros(cfg.hidden_size)), f"{EMB}: the pad_token_id row must start at 0, got {w[3]}"
    emb(torch.tensor([[5, 7, 3, 3]])).pow(2).sum().backward()
    assert torch.equal(w.grad[3], torch.zeros(cfg.hidden_size)), \
        f"{EMB}: the pad_token_id row got a gradient {w.grad[3]}: word_embedding needs padding_idx=config.pad_token_id"
    assert w.grad[5].abs().sum() > 0, f"{EMB}: a real token's row must get a gradient"
