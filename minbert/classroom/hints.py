"""Hints for the usual mistakes: each known-wrong variant is computed here, in the parent, on the same case (with
torch.nn.functional from the case's own weights: no code shared with the graded functions); a miss that equals one
of them gets its hint. Instructor-only (never in the student copy).
"""

import math

import torch
import torch.nn.functional as F

from minbert.classroom.references import einsum_attention_from_weights

TOL = dict(atol=1e-5, rtol=1e-4)


def _ln(x, state, prefix):
    return F.layer_norm(x, (x.shape[-1],), state[prefix + ".weight"], state[prefix + ".bias"], 1e-12)


def _lin(x, state, prefix, transpose=True):
    w = state[prefix + ".weight"]
    return x @ (w.T if transpose else w) + state[prefix + ".bias"]


def embeddings(case):
    s, ids = case["state"], case["ids"]
    T = ids.shape[1]
    word = s["word_embedding.weight"][ids] if case.get("word_embeds") is None else case["word_embeds"]
    types = case.get("types")
    typ = s["tk_type_embedding.weight"][torch.zeros_like(ids) if types is None else types]
    pos = s["pos_embedding.weight"][:T]
    yield "the position vectors of 0..T-1 are missing", {"y": _ln(word + typ, s, "layer_norm")}
    yield "the token-type vectors are missing", {"y": _ln(word + pos, s, "layer_norm")}
    yield "LayerNorm is missing (or comes before the sum)", {"y": word + pos + typ}


def attention(case):
    s, H = case["state"], case["cfg"]["num_attention_heads"]
    run = lambda **kw: {"y": einsum_attention_from_weights(s, H, case["x"], case["am"], **kw)}
    yield "the softmax must run over the keys (the last dimension)", run(softmax_dim=-2)
    yield "the scores are not scaled: divide Q Kᵀ by √D, D the head width", run(scale=False)
    yield "the mask is subtracted: it is additive, -10000 at padding, so ADD it before the softmax", run(mask_sign=-1)
    yield "padded keys get probability: add the mask to the scores before the softmax", run(mask=False)


def layer(case):
    if case["op"] != "bert_layer":
        return
    s, h, H = case["state"], case["h"], case["cfg"]["num_attention_heads"]
    att = lambda x: _lin(einsum_attention_from_weights(s, H, x, case["am"], prefix="self_attention."),
                         s, "attention_dense")
    ffn = lambda x: _lin(F.gelu(_lin(x, s, "interm_dense")), s, "out_dense")
    extra = 0 if case.get("extra") is None else case["extra"]
    a = h + att(_ln(h, s, "attention_layer_norm"))
    yield ("this is pre-LN (LayerNorm before each sublayer); BERT is post-LN: LayerNorm(x + sublayer(x))",
           {"y": a + ffn(_ln(a, s, "out_layer_norm")) + extra})
    a = _ln(h + att(h), s, "attention_layer_norm")
    yield ("the second residual is missing: LayerNorm 2 takes a + FFN(a)",
           {"y": _ln(ffn(a) + extra, s, "out_layer_norm")})
    if case.get("extra") is not None:
        yield "`extra` is not added before LayerNorm 2", {"y": _ln(a + ffn(a), s, "out_layer_norm")}


def adamw(case):
    if case["op"] != "steps":
        return
    for text, kw in (("no bias correction: divide m by 1 − β1^t and v by 1 − β2^t", dict(correct=False)),
                     ("ε is added to the uncorrected sqrt(v) (the handout's placement); add it to sqrt(v̂) = "
                      "sqrt(v)/sqrt(1 − β2^t)", dict(eps_inside=True)),
                     ("the decay is L2 (λ·p added to the gradient); AdamW decays the weights directly: "
                      "p·(1 − lr·λ)",
                      dict(l2=True)),
                     ("the decay comes after the Adam step; decay first, as torch does", dict(decay_after=True)),
                     ("the decay is not scaled by lr: p·(1 − lr·λ), not p·(1 − λ)", dict(decay_no_lr=True))):
        yield text, {"trajectory": _adamw(case, **kw)}


def _adamw(case, correct=True, eps_inside=False, l2=False, decay_after=False, decay_no_lr=False):
    h = case["hparams"]
    lr, b1, b2, eps, wd = h["lr"], h["beta1"], h["beta2"], h["eps"], h["wd"]
    ps = [p.double().clone() for p in case["params"]]
    ms = [torch.zeros_like(p) for p in ps]
    vs = [torch.zeros_like(p) for p in ps]
    out = []
    for t, grads in enumerate(case["grads"], 1):
        for p, g, m, v in zip(ps, grads, ms, vs):
            g = g.double() + (wd * p if l2 else 0)
            decay = 1 - (wd if decay_no_lr else lr * wd)
            if not l2 and not decay_after:
                p.mul_(decay)
            m.mul_(b1).add_((1 - b1) * g)
            v.mul_(b2).add_((1 - b2) * g * g)
            c1, c2 = (1 - b1**t, 1 - b2**t) if correct else (1.0, 1.0)
            denom = (v.sqrt() + eps) / math.sqrt(c2) if eps_inside else v.sqrt() / math.sqrt(c2) + eps
            p.sub_(lr / c1 * m / denom)
            if not l2 and decay_after:
                p.mul_(decay)
        out.append(torch.cat([p.reshape(-1) for p in ps]))
    return torch.stack(out)


def pals(case):
    s, task, i = case["state"], case["task"], case["layer"]
    h = case["h"]
    down = f"V_E.{task}"
    att = lambda x: einsum_attention_from_weights(s, case["heads"], x, case["am"], prefix=f"attention.{task}.{i}.")
    if case["size"] == case["cfg"]["hidden_size"]:
        yield ("a projection multiplies by W instead of Wᵀ: use the nn.Linear (V_E(h)), which computes h Wᵀ + b",
               {"y": F.gelu(_lin(att(_lin(h, s, down, transpose=False)), s, f"V_D.{task}", transpose=False))})
    yield "GELU is missing after the up-projection V_D", {"y": _lin(att(_lin(h, s, down)), s, f"V_D.{task}")}


def smart(case):
    if case["op"] != "divergence":
        return
    sym = lambda p, q: ((p.softmax(-1) - q.softmax(-1)) * (p.log_softmax(-1) - q.log_softmax(-1))).sum(-1).mean()
    one = lambda p, q: (p.softmax(-1) * (p.log_softmax(-1) - q.log_softmax(-1))).sum(-1).mean()
    two = lambda z: torch.stack([torch.zeros_like(z), z], -1)
    base = {"sst": sym(case["sst_p"], case["sst_q"]), "para": sym(two(case["para_p"]), two(case["para_q"])),
            "sts": (case["sts_p"] - case["sts_q"]).pow(2).mean()}
    yield ("para: a softmax over ONE logit is always 1, so its KL is 0; use the two classes [1 − σ(z), σ(z)]",
           {**base, "para": torch.tensor(0.0)})
    yield "only one direction of the KL: the symmetric divergence is KL(P‖Q) + KL(Q‖P)", {
        **base, "sst": one(case["sst_p"], case["sst_q"]), "para": one(two(case["para_p"]), two(case["para_q"]))}


def mml(case):
    if case["op"] != "predict":
        return
    out, active = case["outputs"].double(), case["state"]["active"]
    yield ("Eq. 5 averages the LOGITS, then one softmax; this is the mean of the heads' probabilities",
           {"y": out[:, active].softmax(-1).mean(1)})
    yield "eliminated heads (active False) must not count in Eq. 5", {"y": out.mean(1).softmax(-1)}


def recognise(key: str, case: dict, got: dict) -> str:
    """The hint of the first known mistake that `got` equals, else ''."""
    variants = globals().get(key)                    # the known mistakes named like the assignment's key
    if not callable(variants):
        return ""
    try:
        for text, want in variants(case):
            if all(isinstance(got.get(k), torch.Tensor) and got[k].shape == w.shape
                   and torch.allclose(got[k].double(), w.double(), **TOL) for k, w in want.items()):
                return text
    except Exception:          # noqa: BLE001 - a hint must never break grading
        return ""
    return ""
