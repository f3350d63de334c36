"""The grader's cases, drawn at grading time in the parent from a generator seeded per submission, so that no stored
answer can match them. Weights come from the instructor's modules' initialisers plus noise, so that a zero bias or a
unit LayerNorm gain cannot hide a missing term. The first VISIBLE cases of each assignment and the first case of
each function are shown before the due date; the rest after it (Gradescope's `visibility`).
"""

import torch

VISIBLE = 2      # cases per assignment shown before the due date


def _ri(g, lo, hi):
    return int(torch.randint(lo, hi + 1, (1,), generator=g))


def _rf(g, lo, hi):
    return lo + (hi - lo) * float(torch.rand((), generator=g, dtype=torch.float64))


def _jitter(module, g, scale=0.1):
    """Random state dict of `module`: its init plus noise on every floating tensor."""
    state = {}
    for k, v in module.state_dict().items():
        state[k] = v + scale * torch.randn(v.shape, generator=g, dtype=v.dtype) if v.is_floating_point() else v.clone()
    return state


def _cfg(g):
    H = _ri(g, 1, 4)
    C = H * _ri(g, 2, 6)
    return dict(vocab_size=_ri(g, 20, 60), hidden_size=C, num_hidden_layers=_ri(g, 1, 2), num_attention_heads=H,
                intermediate_size=_ri(g, C, 3 * C), max_position_embeddings=32, type_vocab_size=_ri(g, 2, 3),
                hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1, layer_norm_eps=1e-12)


def _mask(g, B, T):
    """(B, T) attention mask, 1 = real: the first row full, every other row padded at one position at least;
    a single row is padded, so that no case lets code that ignores the mask pass (whatever the seed)."""
    am = torch.ones(B, T, dtype=torch.long)
    for b in range(1 if B > 1 else 0, B):
        am[b, _ri(g, 1, max(1, T - 1)):] = 0
    return am


def _additive(am):
    return (1.0 - am[:, None, None, :].float()) * -10000.0         # (B, 1, 1, T)


def embeddings(g):
    from minbert.bert.config import BertConfig
    from minbert.bert.layers import Embeddings
    cases = []
    for i in range(6):
        cfg = _cfg(g)
        B, T = _ri(g, 1, 4), _ri(g, 2, 12)
        ids = torch.randint(0, cfg["vocab_size"], (B, T), generator=g)
        case = dict(cfg=cfg, state=_jitter(Embeddings(BertConfig(**cfg)), g), ids=ids)
        if i % 3 != 1:
            case["types"] = torch.randint(0, cfg["type_vocab_size"], (B, T), generator=g)
        if i == 5:
            case["word_embeds"] = torch.randn(B, T, cfg["hidden_size"], generator=g)
        cases.append(case)
    return cases


def attention(g):
    from minbert.bert.attention import SelfAttention
    from minbert.bert.config import BertConfig
    cases = []
    for _ in range(6):
        cfg = _cfg(g)
        B, T = _ri(g, 1, 4), _ri(g, 2, 10)
        am = _mask(g, B, T)
        cases.append(dict(cfg=cfg, state=_jitter(SelfAttention(BertConfig(**cfg)), g, 0.3),
                          x=torch.randn(B, T, cfg["hidden_size"], generator=g), mask=_additive(am), am=am))
    return cases


def layer(g):
    from minbert.bert.config import BertConfig
    from minbert.bert.layers import BertLayer
    from minbert.bert.model import BertModel
    cases = []
    for i in range(6):
        cfg = _cfg(g)
        B, T = _ri(g, 1, 3), _ri(g, 2, 9)
        am = _mask(g, B, T)
        x = torch.randn(B, T, cfg["hidden_size"], generator=g)
        if i < 4:
            case = dict(op="bert_layer", cfg=cfg, state=_jitter(BertLayer(BertConfig(**cfg, fast_attention=True)), g),
                        h=x, mask=_additive(am), am=am)
            if i % 2:
                case["extra"] = torch.randn(B, T, cfg["hidden_size"], generator=g)
        else:
            case = dict(op="encode", cfg=cfg, state=_jitter(BertModel(BertConfig(**cfg, fast_attention=True)), g),
                        x=x, attention_mask=am)
        cases.append(case)
    return cases


def adamw(g):
    cases = []
    for i in range(8):
        if i >= 6:
            total = _ri(g, 3, 20)
            cases.append(dict(op="schedule", warmup=0 if i == 7 else _ri(g, 1, total), total=total))
            continue
        shapes = [(_ri(g, 1, 5), _ri(g, 1, 4)), (_ri(g, 1, 6),)]
        params = [torch.randn(s, generator=g) for s in shapes]
        steps = _ri(g, 2, 6)
        grads = [[torch.randn(s, generator=g) * _rf(g, 1e-3, 2.0) for s in shapes] for _ in range(steps)]
        hparams = dict(lr=_rf(g, 1e-3, 5e-2), beta1=_rf(g, 0.5, 0.95), beta2=_rf(g, 0.9, 0.999),
                       eps=[1e-8, 1e-6, 1e-3][i % 3], wd=0.0 if i == 1 else _rf(g, 0.01, 0.3))
        cases.append(dict(op="steps", params=params, grads=grads, hparams=hparams))
    return cases


def multitask(g):
    from minbert.tasks import multitask as M
    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    cases = []
    for i in range(3):
        C = _ri(g, 4, 12)
        mlp = i > 0
        args = dict(kind="mlp" if mlp else "linear", C=C, out=_ri(g, 1, 5), dropout=0.1,
                    hidden_layers=_ri(g, 1, 3), activation=["gelu", "relu"][i % 2],
                    C_in=2 * C if i == 2 else 0)
        head = M.make_head(args["kind"], C, args["out"], 0.1, args["hidden_layers"], args["activation"],
                           args["C_in"] or None)
        cases.append(dict(op="make_head", args=args, state=_jitter(head, g),
                          x=torch.randn(_ri(g, 1, 4), args["C_in"] or C, generator=g)))
    for _ in range(2):
        cfg = _cfg(g)
        B, T = _ri(g, 2, 4), _ri(g, 2, 8)
        cases.append(dict(op="pooled", cfg=cfg, x=torch.randn(B, T, cfg["hidden_size"], generator=g),
                          hidden=torch.randn(B, T, cfg["hidden_size"], generator=g), attention_mask=_mask(g, B, T)))
    cfg = _cfg(g)
    model = M.MultitaskBert(BertModel(BertConfig(**cfg, fast_attention=True)), head="mlp")
    cases.append(dict(op="head", cfg=cfg, head="mlp", state=_jitter(model.heads, g),
                      u=torch.randn(_ri(g, 1, 4), cfg["hidden_size"], generator=g)))
    for _ in range(2):
        B = _ri(g, 1, 6)
        cases.append(dict(op="loss", sst_out=torch.randn(B, 5, generator=g) * 3,
                          sst_labels=torch.randint(0, 5, (B,), generator=g), para_out=torch.randn(B, generator=g) * 3,
                          para_labels=torch.randint(0, 2, (B,), generator=g).float(),
                          sts_out=torch.randn(B, generator=g) * 3, sts_labels=torch.rand(B, generator=g) * 5))
    return cases


def pals(g):
    from minbert.bert.config import BertConfig
    from minbert.methods.pals import PALs
    cases = []
    for i in range(5):
        cfg = _cfg(g)
        heads = _ri(g, 1, 3)
        size = cfg["hidden_size"] if i == 4 else heads * _ri(g, 1, 4)   # one square case: S = C
        if i == 4:
            heads = cfg["num_attention_heads"]
        B, T = _ri(g, 1, 3), _ri(g, 2, 8)
        am = _mask(g, B, T)
        p = PALs(BertConfig(**cfg, fast_attention=True), ["sst", "para"], size=size, heads=heads)
        cases.append(dict(cfg=cfg, size=size, heads=heads, state=_jitter(p, g, 0.3), task=["sst", "para"][i % 2],
                          layer=_ri(g, 0, cfg["num_hidden_layers"] - 1),
                          h=torch.randn(B, T, cfg["hidden_size"], generator=g),
                          mask=_additive(am), am=am))
    return cases


def smart(g):
    from minbert.classroom.scenarios import Toy
    cases = []
    for _ in range(2):
        B = _ri(g, 1, 5)
        cases.append(dict(op="divergence", sst_p=torch.randn(B, 5, generator=g) * 2,
                          sst_q=torch.randn(B, 5, generator=g) * 2,
                          para_p=torch.randn(B, generator=g) * 2, para_q=torch.randn(B, generator=g) * 2,
                          sts_p=torch.randn(B, generator=g) * 2, sts_q=torch.randn(B, generator=g) * 2))
    for i in range(3):
        C, B, T = _ri(g, 2, 6), _ri(g, 1, 3), _ri(g, 2, 5)
        toy = Toy(C).double()
        task = ["sst", "para", "sts"][i]
        state = _jitter(toy, g)
        toy.load_state_dict(state)
        x = torch.randn(B, T, C, generator=g, dtype=torch.float64)
        with torch.no_grad():
            clean = toy(task, {}, embeds=x)
            target = clean + 0.1 * torch.randn(clean.shape, generator=g, dtype=torch.float64)
        cases.append(dict(op="perturb", C=C, state=state, task=task, x=x, target=target,
                          delta0=1e-3 * torch.randn(B, T, C, generator=g, dtype=torch.float64),
                          epsilon=[1.0, 2e-4, 5e-4][i], eta=1e-3))
    for _ in range(2):
        C = _ri(g, 2, 5)
        toy = Toy(C).double()
        cases.append(dict(op="teacher", C=C, state=_jitter(toy, g),
                          states=[_jitter(toy, g) for _ in range(_ri(g, 2, 4))],
                          beta=[_rf(g, 0.3, 0.9), _rf(g, 0.5, 0.99)], beta_switch=0.5, total_steps=_ri(g, 2, 6)))
    return cases


def _gram(g, K):
    v = torch.randn(K, _ri(g, K, 8), generator=g, dtype=torch.float64)
    v[1] = -0.8 * v[0] + 0.6 * v[1]                                  # at least one conflicting pair
    return v @ v.T


def _orders(g, K):
    return [[j for j in torch.randperm(K, generator=g).tolist() if j != i] for i in range(K)]


def surgery(g):
    cases = []
    for i in range(7):
        K = _ri(g, 2, 5)
        gram = _gram(g, K)
        if i < 3:
            cases.append(dict(op="pcgrad", gram=gram, orders=_orders(g, K)))
        else:
            targets = (torch.rand(K, K, generator=g, dtype=torch.float64) - 0.3) * (0 if i == 3 else 1)
            cases.append(dict(op="gradvac", gram=gram, orders=_orders(g, K), targets=targets, beta=_rf(g, 0.01, 0.5)))
    return cases


def meanshift(g):
    cases = []
    for i in range(6):
        n_clusters, per = _ri(g, 1, 4), _ri(g, 2, 6)
        centres = torch.randn(n_clusters, generator=g, dtype=torch.float64) * 10
        x = (centres[:, None] + 0.3 * torch.randn(n_clusters, per, generator=g, dtype=torch.float64)).reshape(-1)
        x = x[torch.randperm(x.numel(), generator=g)]
        if i < 2:
            cases.append(dict(op="bandwidth", x=x, quantile=_rf(g, 0.1, 0.6)))
        else:
            cases.append(dict(op="shift", x=x, bandwidth=_rf(g, 0.8, 2.0) if i < 5 else 100.0))
    return cases


def mml(g):
    from minbert.methods.mml import MultiverseHeads
    cases = []
    for i in range(8):
        D, K, M = _ri(g, 2, 6), [1, 2, 3][i % 3], _ri(g, 3, 6)
        heads = MultiverseHeads(D, K, M)
        state = _jitter(heads, g)
        active = torch.rand(M, generator=g) > 0.3
        active[_ri(g, 0, M - 1)] = True
        state["active"] = active if i >= 2 else torch.ones(M, dtype=torch.bool)
        case = dict(D=D, K=K, M=M, state=state)
        if i < 2:
            case.update(op="mv_loss")
        elif i < 4:
            case.update(op="predict", outputs=torch.randn(_ri(g, 1, 4), M, K, generator=g) * 3)
            case["K"] = K = 2 + i                                            # classification
            case["state"] = _jitter(MultiverseHeads(D, K, M), g)
            case["state"]["active"] = active
            case["outputs"] = torch.randn(_ri(g, 1, 4), M, K, generator=g) * 3
        elif i < 6:
            case.update(op="observe", momentum=_rf(g, 0.5, 0.95),
                        losses=[torch.rand(M, generator=g) * 3 for _ in range(_ri(g, 1, 4))])
        else:
            active[:2] = True                                                # at least two heads to split
            ids = active.nonzero().squeeze(1)
            labels = torch.randint(0, 2, (len(ids),), generator=g)
            labels[0], labels[-1] = 0, 1
            case.update(op="eliminate", every=10, avgs=torch.rand(M, generator=g) * 3,
                        centers=torch.tensor([_rf(g, 0, 3), _rf(g, 0, 3)], dtype=torch.float64), labels=labels)
            case["state"]["active"] = active
        cases.append(case)
    return cases


def draw(key: str, seed: int) -> list[dict]:
    """The cases of one assignment for this submission's seed: the maker named like the assignment's key."""
    from minbert.classroom.assignments import ASSIGNMENTS, BY_KEY
    g = torch.Generator().manual_seed(seed + ASSIGNMENTS.index(BY_KEY[key]))
    with torch.random.fork_rng(devices=[]):   # modules draw their init from torch's global generator: seed it too,
        torch.manual_seed(seed)               # so that a regrade with the same salt draws the same weights
        return globals()[key](g)


def describe(case: dict) -> str:
    """A short label: the op and the shapes, for the result names."""
    parts = [case["op"]] if "op" in case else []
    for k, v in case.items():
        if isinstance(v, torch.Tensor) and k not in ("state", "mask") and v.dim() > 0 and len(parts) < 3:
            parts.append(f"{k} {tuple(v.shape)}")
    return ", ".join(parts) if parts else "case"

