"""Instructor-only reference checks moved out of tests/bert/test_layers.py: they compare the graded function with an
independent written-out reference (minbert/classroom/references.py). The student copy leaves this file out;
tests/bert/test_layers.py keeps its property and stored-case checks.
"""

import torch
import torch.nn.functional as F

from test_layers import ATOL, LAYER, RTOL, extended_attention_mask, hint, max_diff, reference

from minbert.classroom.references import written_out_layer


def test_bert_layer_matches_stored_reference():
    ref, model = reference()
    layer, real = model.layers[0], ref["attention_mask"].bool()
    mask = extended_attention_mask(ref["attention_mask"], torch.float32)         # (B, 1, 1, T)
    h = ref["embeddings"]
    with torch.no_grad():
        out = layer(h, mask)
        mistakes = [("use the exact GELU (F.gelu), not ReLU", written_out_layer(layer, h, mask, act=F.relu)),
                    ("use the exact erf GELU, not the tanh approximation",
                     written_out_layer(layer, h, mask, act=lambda x: F.gelu(x, approximate="tanh"))),
                    ("add the residual (the sublayer's input) before each LayerNorm",
                     written_out_layer(layer, h, mask, residual=False))]
    assert out.shape == h.shape, f"{LAYER}: expected (B, T, C) = {tuple(h.shape)}, got {tuple(out.shape)}"
    torch.testing.assert_close(out[real], ref["hidden_1"][real], atol=ATOL, rtol=RTOL, msg=lambda m:
        f"{LAYER} differs from the stored HF layer output at real positions "
        f"(max |Δ| {max_diff(out[real], ref['hidden_1'][real]):.2e})" + hint(out[real], [(t, v[real]) for t, v in mistakes]) + f"\n{m}")


def test_bert_layer_adds_extra_before_the_second_layer_norm():
    """Live oracle: LN2(a + FFN(a) + extra) written out; extra is PALs' hook (no dropout on it)."""
    ref, model = reference()
    layer = model.layers[1]
    mask = extended_attention_mask(ref["attention_mask"], torch.float32)
    h, extra = ref["hidden_1"], torch.randn(ref["hidden_1"].shape, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        out = layer(h, mask, extra)
        want = written_out_layer(layer, h, mask, extra=extra)
        after = written_out_layer(layer, h, mask) + extra
    torch.testing.assert_close(out, want, atol=ATOL, rtol=RTOL, msg=lambda m:
        f"{LAYER}(h, mask, extra): expected LayerNorm2(a + FFN(a) + extra), max |Δ| {max_diff(out, want):.2e}"
        + hint(out, [("add extra INSIDE the second LayerNorm, not after it", after)]) + f"\n{m}")
