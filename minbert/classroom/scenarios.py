"""How each graded function is called: glue shared by the grader's parent (against the instructor's package: the
reference) and its child (against the submission). `run(key, case)` builds the objects from whichever `minbert` is
first on sys.path, loads the case's weights, calls the graded function and returns a dict of tensors. It holds no
solution; fakes (a toy model for SMART, a fixed clustering for MML, the encoder output for mean pooling) keep each
assignment independent of the others' code.
"""

import torch
from torch import nn


def _config(case, **overrides):
    from minbert.bert.config import BertConfig
    return BertConfig(**{**case["cfg"], **overrides})


def _load(module, state):
    module.load_state_dict(state, strict=True)
    return module.eval()


class Toy(nn.Module):
    """SMART's stand-in classifier: embeds -> Linear -> tanh -> mean over tokens -> heads."""

    def __init__(self, C):
        super().__init__()
        self.enc = nn.Linear(C, C)
        self.heads = nn.ModuleDict({"sst": nn.Linear(C, 5), "para": nn.Linear(C, 1), "sts": nn.Linear(C, 1)})

    def forward(self, task, batch, embeds=None, word_embeds=None):
        out = self.heads[task](torch.tanh(self.enc(embeds)).mean(1))     # (B, 5) or (B, 1)
        return out.squeeze(-1) if out.shape[-1] == 1 else out


def embeddings(case):
    from minbert.bert.layers import Embeddings
    emb = _load(Embeddings(_config(case)), case["state"])
    return {"y": emb(case["ids"], case.get("types"), case.get("word_embeds"))}


def attention(case):
    from minbert.bert.attention import SelfAttention
    attn = _load(SelfAttention(_config(case, fast_attention=False)), case["state"])
    return {"y": attn(case["x"], case["mask"])}


def layer(case):
    if case["op"] == "bert_layer":
        from minbert.bert.layers import BertLayer
        lay = _load(BertLayer(_config(case, fast_attention=True)), case["state"])
        return {"y": lay(case["h"], case["mask"], case.get("extra"))}
    from minbert.bert.model import BertModel
    model = _load(BertModel(_config(case, fast_attention=True)), case["state"])
    out = model.encode(case["x"], case.get("attention_mask"))
    return {"h": out["last_hidden_state"], "pooled": out["pooler_output"]}


def adamw(case):
    from minbert import adamw as A
    if case["op"] == "schedule":
        p = nn.Parameter(torch.zeros(1))
        sched = A.linear_warmup_decay(A.AdamW([p], lr=1.0), case["warmup"], case["total"])
        return {"multipliers": torch.tensor([float(sched.lr_lambdas[0](s)) for s in range(case["total"] + 3)],
                                            dtype=torch.float64)}
    params = [nn.Parameter(p.clone()) for p in case["params"]]
    h = case["hparams"]
    opt = A.AdamW(params, lr=h["lr"], betas=(h["beta1"], h["beta2"]), eps=h["eps"], weight_decay=h["wd"])
    trajectory = []
    for grads in case["grads"]:                      # one list of gradients per step
        for p, g in zip(params, grads):
            p.grad = g.clone()
        opt.step()
        trajectory.append(torch.cat([p.detach().reshape(-1) for p in params]))
    return {"trajectory": torch.stack(trajectory)}   # (steps, total parameter count)


def multitask(case):
    from minbert.tasks import multitask as M
    from minbert.bert.model import BertModel
    op = case["op"]
    if op == "make_head":
        a = case["args"]
        head = M.make_head(a["kind"], a["C"], a["out"], a["dropout"], a["hidden_layers"], a["activation"],
                           a["C_in"] or None)
        return {"y": _load(head, case["state"])(case["x"])}
    if op == "loss":
        return {t: M.task_loss(t, case[t + "_out"], case[t + "_labels"]).reshape(()) for t in M.TASKS}
    model = M.MultitaskBert(BertModel(_config(case, fast_attention=True)), head=case.get("head", "linear"),
                            pooling="mean").eval()
    if op == "pooled":
        given = {"last_hidden_state": case["hidden"], "pooler_output": case["hidden"][:, 0]}
        model.encoder.encode = lambda x, attention_mask=None, layer_extra=None: given   # the layers are assignment 3
        return {"y": model.pooled("sst", case["x"], case["attention_mask"])}
    model.heads.load_state_dict(case["state"])
    return {t: model.head(t, case["u"]) for t in M.TASKS}


def pals(case):
    from minbert.methods.pals import PALs
    p = _load(PALs(_config(case, fast_attention=True), ["sst", "para"], size=case["size"], heads=case["heads"]),
              case["state"])
    return {"y": p(case["task"], case["layer"], case["h"], case["mask"])}


def smart(case):
    from minbert.methods import smart as S
    op = case["op"]
    if op == "divergence":
        return {t: S.divergence(t, case[t + "_p"], case[t + "_q"]).reshape(()) for t in ("sst", "para", "sts")}
    model = _load(Toy(case["C"]).double(), case["state"])
    if op == "perturb":
        sm = S.SMART(model, epsilon=case["epsilon"], eta=case["eta"], steps=1, mu=0, mode="paper")
        return {"delta": sm.perturb(case["task"], {}, case["x"], case["target"], case["delta0"])}
    sm = S.SMART(model, mu=1.0, beta=tuple(case["beta"]), beta_switch=case["beta_switch"],
                 total_steps=case["total_steps"], mode="paper")
    out = []
    for state in case["states"]:                     # the student's weights after each optimizer step
        model.load_state_dict(state)
        sm.update_teacher()
        out.append(torch.cat([p.reshape(-1) for p in sm.teacher.state_dict().values()]))
    return {"teacher": torch.stack(out)}


def surgery(case):
    gram, orders = case["gram"], case["orders"]
    if case["op"] == "pcgrad":
        from minbert.methods.pcgrad import pcgrad_coefficients
        coef, n = pcgrad_coefficients(gram, orders)
        return {"coef": coef, "projections": torch.tensor(n)}
    from minbert.methods.gradvac import gradvac_coefficients
    targets = case["targets"].clone()
    coef, n = gradvac_coefficients(gram, orders, targets, case["beta"])
    return {"coef": coef, "adjustments": torch.tensor(n), "targets": targets}


def meanshift(case):
    import numpy as np

    from minbert.methods import meanshift as MS
    x = case["x"].numpy()
    if case["op"] == "bandwidth":
        return {"bandwidth": torch.tensor(float(MS.estimate_bandwidth(x, case["quantile"])), dtype=torch.float64)}
    centers, labels = MS.mean_shift(x, case["bandwidth"])
    return {"centers": torch.as_tensor(np.asarray(centers, dtype=np.float64)),
            "labels": torch.as_tensor(np.asarray(labels, dtype=np.int64))}


def mml(case):
    from minbert.methods import mml as MM
    heads = MM.MultiverseHeads(case["D"], case["K"], case["M"])
    _load(heads, case["state"])
    op = case["op"]
    if op == "mv_loss":
        return {"loss": heads.multiverse_loss().reshape(())}
    if op == "predict":
        return {"y": heads.predict(case["outputs"])}
    elim = MM.HeadEliminator(heads, every=case.get("every", 10), momentum=case.get("momentum", 0.9), min_heads=1)
    if op == "observe":
        for losses in case["losses"]:
            elim.observe(losses)
        return {"moving_avg": elim.moving_avg.clone()}
    # elimination with a fixed clustering: MeanShift is assignment 9, faked here
    elim.moving_avg.copy_(case["avgs"])
    fixed = (case["centers"].numpy(), case["labels"].numpy())
    saved = MM.estimate_bandwidth, MM.mean_shift
    MM.estimate_bandwidth = lambda x, quantile=0.3: 0.1
    MM.mean_shift = lambda x, bandwidth, max_iter=300: fixed
    try:
        elim.maybe_eliminate(case["every"])
    finally:                                         # the parent runs this too: leave its module as found
        MM.estimate_bandwidth, MM.mean_shift = saved
    return {"active": heads.active.clone().long()}


def run(key: str, case: dict) -> dict:
    """Outputs of one case, detached, as float64/int64 CPU tensors (no_grad except where autograd is graded)."""
    with torch.set_grad_enabled(key == "smart" and case["op"] == "perturb"):
        out = globals()[key](case)                   # the scenario named like the assignment's key
    if not isinstance(out, dict):
        raise TypeError(f"scenario {key} returned {type(out).__name__}")
    clean = {}
    for name, value in out.items():
        if not isinstance(value, torch.Tensor):
            value = torch.as_tensor(value)
        value = value.detach().cpu()
        clean[name] = value.double() if value.is_floating_point() else value.long()
    return clean
