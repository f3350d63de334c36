"""One shared BERT encoder, three task heads: the CS224N multitask model.

Tasks (names used everywhere: "sst", "para", "sts"):
  sst   SST-5 sentiment      5-way classification   cross-entropy            metric: accuracy
  para  Quora paraphrase     one logit per pair     BCE with logits          metric: accuracy of logit > 0
  sts   SemEval STS          one score per pair     MSE on float32 labels    metric: Pearson r

Heads read one vector per sequence, (B, C), chosen by `pooling`:
  pooler   BERT's pooler_output = tanh(W·h_[CLS] + b) (the handout's choice, default);
  mean     the mean of the last hidden states over real tokens; the better choice for
           checkpoints trained with mean pooling, such as all-MiniLM-L6-v2 (minilm-l6).
A pair task uses one of these pair heads (`pair_heads={"para": ..., "sts": ...}`):
  cross       (default) one sequence "[CLS] a [SEP] b [SEP]" with token types, so attention
              compares the sentences token by token; then a head as for SST (`make_head`):
                linear  Dropout -> Linear(C, out)
                mlp     [Dropout -> Linear -> act] x hidden_layers -> Dropout -> Linear(C, out),
                        width C, act GELU (default) or ReLU. hidden_layers=1, GELU is the
                        original minbert head; 2 hidden GELU layers are Song, Hu & Pan's
                        (CS224N report, §3.1); 1 hidden ReLU layer of width C is Pritsky et
                        al.'s best (CS224N report, §3.3.3 and §4.4).
  cross_tanh  STS only: as cross, squashed by tanh onto [0, 5] (pair_heads.TanhScaledHead; Benton)
  cosine      bi-encoder: a and b encoded separately, cos(u, v) (pair_heads.CosineHead)
  dot         bi-encoder: u · v (pair_heads.DotHead; Benton's STS baseline)
  concat      bi-encoder: [u; v] -> a head as above on 2C inputs (pair_heads.ConcatHead;
              Song, Hu & Pan; Pritsky et al.'s "concat embed.")
  siamese     bi-encoder: [u, v, |u − v|, u ⊙ v] -> MLP (pair_heads.SiameseHead)
Bi-encoder tasks need TaskData(..., pair_mode="separate"); `features` then returns (u, v), which
the MNR loss (mnr.py) also uses. The paraphrase head returns one logit (so the handout's
`logits.sigmoid().round()` evaluation works); STS predicts the raw score (Pearson r ignores scale).

PALs (pals.py), when given, add a task-specific term inside every layer: the task id reaches
the encoder through `layer_extra`. `frozen_encoder=True` (--option pretrain) trains no encoder
weight; without PALs the encoder then runs under no_grad (no activations kept, so a step costs
little more than a forward), with PALs it must keep the graph for the PAL gradients.

`gradvac_groups` partitions the trainable parameters by transformer layer for GradVac's
per-layer similarity targets (--gradvac_groups layer): it is here because it reads this model's
parameter names.
"""

import torch
import torch.nn.functional as F
from torch import nn

from minbert.core import flags
from minbert.bert.model import BertModel
from minbert.core.errors import UserError
from minbert.tasks.metrics import accuracy, cs224n_overall, pearson
from minbert.tasks.pair_heads import ConcatHead, CosineHead, DotHead, SiameseHead, TanhScaledHead
from minbert.tasks.scoring import in_order

TASKS = ("sst", "para", "sts")
NUM_OUTPUTS = {"sst": 5, "para": 1, "sts": 1}
PAIR_HEADS = ("cross", "cross_tanh", "cosine", "dot", "concat", "siamese")
CROSS_HEADS = ("cross", "cross_tanh")   # pair heads that read one joint sequence
HEAD_ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU}
POOLINGS = ("pooler", "mean")
STS_RANGE = (0.0, 5.0)


def make_head(kind: str, C: int, out: int, dropout: float, hidden_layers: int = 1,
              activation: str = "gelu", C_in: int | None = None) -> nn.Sequential:
    """(B, C_in) -> (B, out); C_in defaults to C. 'linear': Dropout -> Linear. 'mlp': hidden_layers
    blocks of Dropout -> Linear(·, C) -> activation, then Dropout -> Linear(C, out)."""
    C_in = C_in or C
    if kind not in ("linear", "mlp"):
        raise ValueError(f"head must be 'linear' or 'mlp', got {kind!r}")
    if activation not in HEAD_ACTIVATIONS:
        raise ValueError(f"head activation must be one of {sorted(HEAD_ACTIVATIONS)}, got {activation!r}")
    if kind == "mlp" and hidden_layers < 1:
        raise ValueError(f"an 'mlp' head needs hidden_layers >= 1, got {hidden_layers} (use head='linear' for none)")
    # Hint: the heads of the module docstring as nn.Sequential: linear = Dropout -> Linear(C_in, out);
    # mlp = hidden_layers x (Dropout -> Linear(C_in, then C, -> C) -> activation), then Dropout -> Linear(C, out).
    ### BEGIN SOLUTION multitask
    if kind == "linear":
        return nn.Sequential(nn.Dropout(dropout), nn.Linear(C_in, out))
    layers = []
    for i in range(hidden_layers):
        layers += [nn.Dropout(dropout), nn.Linear(C_in if i == 0 else C, C), HEAD_ACTIVATIONS[activation]()]
    return nn.Sequential(*layers, nn.Dropout(dropout), nn.Linear(C, out))
    ### END SOLUTION


class MultitaskBert(nn.Module):
    def __init__(self, encoder: BertModel, head: str = "linear", dropout: float = 0.1,
                 frozen_encoder: bool = False, pair_heads: dict | None = None, pals=None,
                 pooling: str = "pooler", head_layers: int = 1, head_activation: str = "gelu"):
        super().__init__()
        if pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {POOLINGS}, got {pooling!r}")
        self.encoder = encoder
        self.pooling = pooling
        self.pals = pals
        self.frozen_encoder = frozen_encoder
        encoder.requires_grad_(not frozen_encoder)
        self.pair_heads = {"para": "cross", "sts": "cross", **(pair_heads or {})}
        C = encoder.config.hidden_size
        heads = {}
        for t in TASKS:
            kind = self.pair_heads.get(t, "cross")
            mlp = dict(hidden_layers=head_layers, activation=head_activation)
            if kind == "cross":
                heads[t] = make_head(head, C, NUM_OUTPUTS[t], dropout, **mlp)
            elif kind == "cross_tanh" and t == "sts":
                heads[t] = TanhScaledHead(make_head(head, C, 1, dropout, **mlp), scale_to=STS_RANGE)
            elif kind == "cosine":
                heads[t] = CosineHead(scale_to=STS_RANGE if t == "sts" else None)
            elif kind == "dot":
                heads[t] = DotHead()
            elif kind == "concat":
                heads[t] = ConcatHead(make_head(head, C, NUM_OUTPUTS[t], dropout, C_in=2 * C, **mlp))
            elif kind == "siamese":
                heads[t] = SiameseHead(C, NUM_OUTPUTS[t], dropout)
            else:
                choices = [k for k in PAIR_HEADS if k != "cross_tanh" or t == "sts"]
                raise ValueError(f"pair head for {t} must be one of {choices}, got {kind!r}")
        self.heads = nn.ModuleDict(heads)

    def bi_encoder(self, task: str) -> bool:
        return self.pair_heads.get(task, "cross") not in CROSS_HEADS

    def embed(self, batch: dict, word_embeds: torch.Tensor | None = None) -> torch.Tensor:
        """(B, T) ids -> (B, T, C) embedding-layer output. `word_embeds` (B, T, C) replaces the
        word-embedding lookup (R3F adds noise there, before positions and LayerNorm)."""
        return self.encoder.embed(batch["input_ids"], batch["token_type_ids"], word_embeds)

    def pooled(self, task: str, x: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """Embedding output x (B, T, C) -> pooled (B, C), with this task's PALs if any."""
        extra = None if self.pals is None else (lambda i, h, m: self.pals(task, i, h, m))
        out = self.encoder.encode(x, attention_mask, layer_extra=extra)
        if self.pooling == "pooler":
            return out["pooler_output"]                                   # (B, C)
        # Hint: mean pooling: average last_hidden_state over the REAL tokens only (attention_mask 1),
        # so padding never changes the sentence vector. (B, T, C) -> (B, C).
        ### BEGIN SOLUTION multitask
        keep = attention_mask.unsqueeze(-1).to(out["last_hidden_state"].dtype)   # (B, T, 1)
        return (out["last_hidden_state"] * keep).sum(1) / keep.sum(1)    # (B, T, C) -> (B, C)
        ### END SOLUTION

    def inputs(self, task: str, batch: dict) -> torch.Tensor:
        """What SMART perturbs: the embedding output of this task's input. (B, T, C) for one sequence; for a
        bi-encoder task both sentences side by side, (B, T + T_b, C), which `features` splits again."""
        x = self.embed(batch)                                                      # (B, T, C)
        if not self.bi_encoder(task):
            return x
        xb = self.encoder.embed(batch["input_ids_b"], batch["token_type_ids_b"])   # (B, T_b, C)
        return torch.cat([x, xb], dim=1)                                           # (B, T + T_b, C)

    def features(self, task: str, batch: dict, embeds=None, word_embeds=None):
        """(u, v): pooled vectors (B, C) of the sequence, and of sentence b for bi-encoder tasks
        (else None). `embeds`, shaped as `inputs` returns it, replaces the embedding output: SMART perturbs it."""
        no_graph = self.frozen_encoder and self.pals is None
        with torch.set_grad_enabled(torch.is_grad_enabled() and not no_graph):
            x = self.embed(batch, word_embeds) if embeds is None else embeds      # (B, T, C) or (B, T + T_b, C)
            if not self.bi_encoder(task):
                return self.pooled(task, x, batch["attention_mask"]), None
            if embeds is None:
                xb = self.encoder.embed(batch["input_ids_b"], batch["token_type_ids_b"])   # (B, T_b, C)
            else:
                T = batch["input_ids"].shape[1]
                x, xb = embeds[:, :T], embeds[:, T:]                               # (B, T, C), (B, T_b, C)
            return self.pooled(task, x, batch["attention_mask"]), self.pooled(task, xb, batch["attention_mask_b"])

    def head(self, task: str, u: torch.Tensor, v: torch.Tensor | None = None) -> torch.Tensor:
        """Pooled features -> sst (B, 5) logits; para (B,) logits; sts (B,) scores."""
        # Hint: run this task's head (bi-encoder heads take u and v); sst keeps (B, 5), the one-output
        # tasks drop the last dimension: (B, 1) -> (B,).
        ### BEGIN SOLUTION multitask
        out = self.heads[task](u) if v is None else self.heads[task](u, v)   # (B, 5) or (B, 1)
        return out if task == "sst" else out.squeeze(-1)
        ### END SOLUTION

    def forward(self, task: str, batch: dict, embeds=None, word_embeds=None) -> torch.Tensor:
        return self.head(task, *self.features(task, batch, embeds, word_embeds))

    # The handout's method names, so course code keeps working.
    def predict_sentiment(self, batch):
        return self("sst", batch)

    def predict_paraphrase(self, batch):
        return self("para", batch)

    def predict_similarity(self, batch):
        return self("sts", batch)


def task_loss(task: str, output: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean loss of one batch, computed in fp32 even under autocast (losses are reductions)."""
    # Hint: sst: cross-entropy on 5 logits; para: binary cross-entropy WITH logits on one logit
    # (labels as floats); sts: mean squared error. All in fp32, mean over the batch.
    ### BEGIN SOLUTION multitask
    output = output.float()
    if task == "sst":
        return F.cross_entropy(output, labels.long())
    if task == "para":
        return F.binary_cross_entropy_with_logits(output, labels.float())
    return F.mse_loss(output, labels.float())
    ### END SOLUTION


# SST-5's classes 0-4 as the CS224N handout names them
SST_LABELS = ("negative", "somewhat negative", "neutral", "somewhat positive", "positive")


def predictions(task: str, output: torch.Tensor) -> list:
    """Head outputs -> the values written to prediction files (ints for sst/para, floats for sts)."""
    if task == "sst":
        return output.argmax(-1).tolist()
    if task == "para":
        return (output > 0).long().tolist()
    return output.float().tolist()


# ---------------------------------------------------------------------- evaluation


def run_heads(model: MultitaskBert, splits: dict, batch_size: int, device, amp: str, desc: str = "eval") -> dict:
    """Head outputs for every example of each split {task: TaskData} (minbert/tasks/scoring.py), in the order they
    were scored, length-sorted (the prediction files' order): {task: (ids, positions in the split, outputs)}.
    Leaves the model in eval mode."""
    model.eval()
    scored = in_order(splits, model, device, amp, batch_size, f"{desc} {', '.join(splits)}")
    return {task: ([splits[task].ids[i] for i in s.order], s.order, s.outputs[s.order]) for task, s in scored.items()}


def task_scores(results: dict, splits: dict) -> dict:
    """Dev metrics of each task present in `results`; the CS224N overall score if all three are."""
    scores = {}
    for task, (_, index, out) in results.items():
        gold = splits[task].labels[index].tolist()
        pred = predictions(task, out)
        key = {"sst": "sst_acc", "para": "para_acc", "sts": "sts_pearson"}[task]
        scores[key] = pearson(pred, gold) if task == "sts" else accuracy(pred, gold)
    if len(scores) == 3:
        scores["overall"] = cs224n_overall(scores["sst_acc"], scores["para_acc"], scores["sts_pearson"])
    return scores


# ---------------------------------------------------------------------- GradVac parameter groups

GRADVAC_GROUPS = ("model", "layer", "matrix")


def gradvac_groups(model: MultitaskBert, params: list, level: str = "model") -> list[list[int]] | None:
    """Partition `params` (indices into the list) for minbert.methods.gradvac.GradVac(groups=...):
    model   one group (None: GradVac's default);
    layer   the embeddings, each transformer layer, the pooler, and the rest (heads, PALs: used by
            one task each, so surgery leaves them alone anyway). Wang et al. 2020 (arXiv:2010.05874)
            found per-layer targets best;
    matrix  every parameter tensor on its own."""
    if level not in GRADVAC_GROUPS:
        raise ValueError(f"gradvac_groups: level must be one of {GRADVAC_GROUPS}, got {level!r}")
    if level == "model":
        return None
    if level == "matrix":
        return [[i] for i in range(len(params))]
    names = {id(p): n for n, p in model.named_parameters()}
    keys = []
    for p in params:
        parts = names[id(p)].split(".")          # e.g. encoder.layers.3.out_dense.weight
        keys.append(".".join(parts[:3]) if parts[:2] == ["encoder", "layers"] else
                    ".".join(parts[:2]) if parts[0] == "encoder" else parts[0])
    order = list(dict.fromkeys(keys))            # groups in model order
    return [[i for i, k in enumerate(keys) if k == key] for key in order]


# ---------------------------------------------------------------------------------------------- flags
def add_args(parser) -> None:
    d = flags.defaults(MultitaskBert)
    g = parser.add_argument_group("the multitask model (heads and pooling)")
    g.add_argument("--option", choices=["pretrain", "finetune"], default="finetune",
                   help="pretrain: BERT frozen, only heads (and PALs) train; finetune: everything trains")
    g.add_argument("--head", choices=["linear", "mlp"], default=d["head"], help="task head on the pooled vector")
    g.add_argument("--head_layers", type=flags.at_least(1), default=d["head_layers"],
                   help="hidden layers of an mlp head (width C); Song/Hu/Pan: 2")
    g.add_argument("--head_activation", choices=sorted(HEAD_ACTIVATIONS), default=d["head_activation"],
                   help="mlp head activation; Pritsky et al.: relu")
    g.add_argument("--pooling", choices=POOLINGS, default=d["pooling"],
                   help="pooler: BERT's tanh([CLS]) (handout); mean: mean of token states (use for minilm-l6)")
    g.add_argument("--para_head", choices=PAIR_HEADS, default="cross",
                   help="cross-encoder, or a bi-encoder head (cosine, dot, concat, siamese)")
    g.add_argument("--sts_head", choices=PAIR_HEADS, default="cross",
                   help="as --para_head, plus cross_tanh (Benton's tanh-scaled cross-encoder); dot: Benton's baseline")
    g.add_argument("--fast_attention", action="store_true",
                   help="F.scaled_dot_product_attention in the encoder: the same maths, faster")
    g.add_argument("--freeze_word_embeddings", action="store_true",
                   help="keep the vocabulary's embedding rows as pretrained: no dense gradient or AdamW update of "
                        "the largest matrix (MiniLM: 11.7M of its 22.7M weights) at each step")


def check_args(args, parser) -> None:
    if args.para_head == "cross_tanh":
        parser.error("--para_head cross_tanh: the tanh-scaled head is for STS scores; use --sts_head cross_tanh")


def model_args(args) -> dict:
    """MultitaskBert's keyword arguments that shape the model, from the flags: what a run records at export."""
    return {"head": args.head, "pooling": args.pooling, "pair_heads": {"para": args.para_head, "sts": args.sts_head},
            "head_layers": args.head_layers, "head_activation": args.head_activation}


def from_args(args, encoder: BertModel, pals=None) -> MultitaskBert:
    if args.max_seq_len > encoder.config.max_position_embeddings:
        raise UserError(f"--max_seq_len {args.max_seq_len}: {args.model} has only "
                        f"{encoder.config.max_position_embeddings} positions")
    model = MultitaskBert(encoder, dropout=args.hidden_dropout_prob, pals=pals,
                          frozen_encoder=args.option == "pretrain", **model_args(args))
    if args.freeze_word_embeddings:   # before the optimizer is built: AdamW's groups hold trainable weights only
        encoder.embeddings.word_embedding.weight.requires_grad_(False)
    return model
