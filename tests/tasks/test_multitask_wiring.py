"""Grades the wiring of minbert.tasks.multitask: which head each flag builds (and its output range), which
inputs reach the encoder (token types, attention masks, SMART's embeds, R3F's word_embeds, bi-encoder
sentences), the pooling paths, the prediction rule, and the command-line flags.

Oracles: (a) the encoder run directly (BertModel, graded on its own in tests/bert/) on the same ids, or on each
sentence alone without padding, as the reference for what the multitask model must feed it; (b) the documented
label range of STS (0-5, the SemEval scores) and the handout's prediction rule (`logits.sigmoid().round()`);
(c) properties: padding never changes a pooled vector, SMART's embeds round-trip.

Run: python -m pytest -q tests/tasks/test_multitask_wiring.py   (offline, CPU, a few seconds)
"""

import argparse

import pytest
import torch
from torch import nn

from conftest import make_batch, tiny_multitask
from minbert.core.errors import UserError
from minbert.tasks import multitask
from minbert.tasks.sampling import to_device
from minbert.tasks.multitask import MultitaskBert, gradvac_groups, make_head, predictions
from minbert.tasks.pair_heads import ConcatHead, CosineHead, SiameseHead, TanhScaledHead


def pair_batch(seed=0):
    """make_batch's (4, 12) ids as sentence a, and a second (4, 9) batch as sentence b; example 1's b is padded."""
    batch = make_batch("sts", seed)
    g = torch.Generator().manual_seed(seed + 1)
    mask_b = torch.ones(4, 9, dtype=torch.long)
    mask_b[1, 5:] = 0
    ids_b = torch.randint(1, 1000, (4, 9), generator=g) * mask_b
    return batch | {"input_ids_b": ids_b, "attention_mask_b": mask_b, "token_type_ids_b": torch.zeros(4, 9, dtype=torch.long)}


def encoder_out(model, ids, mask, types):
    return model.encoder(ids, mask, types)


# ---------------------------------------------------------------------------- heads and their output ranges
def test_sts_heads_score_on_the_label_range_and_para_heads_give_logits():
    """Oracle: STS gold scores lie in [0, 5] (SemEval; read_sts checks it). A cosine STS head maps identical
    sentences to 5, the top of that range; the paraphrase cosine head is a logit s·cos + b (no range): with
    b = −2 identical sentences give 5 − 2 = 3."""
    model = tiny_multitask(pair_heads={"para": "cosine", "sts": "cosine"}).eval()
    b = pair_batch()
    same = b | {"input_ids_b": b["input_ids"], "attention_mask_b": b["attention_mask"],
                "token_type_ids_b": b["token_type_ids"]}
    with torch.no_grad():
        model.heads["para"].bias.fill_(-2.0)
        sts, para = model("sts", same), model("para", same)
        other = model("sts", b)
    torch.testing.assert_close(sts, torch.full((4,), 5.0), rtol=0, atol=1e-4,
                               msg="MultitaskBert(sts_head='cosine'): identical sentences must score 5, the top of STS's 0-5 range")
    torch.testing.assert_close(para, torch.full((4,), 3.0), rtol=0, atol=1e-4,
                               msg="MultitaskBert(para_head='cosine'): a logit s·cos + b, not a score on a range")
    assert ((other >= 0) & (other <= 5)).all(), f"cosine STS scores must stay in [0, 5], got {other}"
    C = model.encoder.config.hidden_size
    e = torch.eye(C)
    u, v = e[[0, 0, 0]], torch.stack([e[0], -e[0], e[1]])   # cos = 1, −1, 0
    with torch.no_grad():
        torch.testing.assert_close(model.head("sts", u, v), torch.tensor([5.0, 0.0, 2.5]), rtol=0, atol=1e-6,
                                   msg="MultitaskBert(sts_head='cosine'): cos 1, −1, 0 must score 5, 0, 2.5 (STS's 0-5 range)")
        torch.testing.assert_close(model.head("para", u, v), torch.tensor([3.0, -7.0, -2.0]), rtol=0, atol=1e-6,
                                   msg="MultitaskBert(para_head='cosine'): the logit 5·cos − 2, unbounded by any range")
    tanh = tiny_multitask(pair_heads={"sts": "cross_tanh"}).eval()
    C = tanh.encoder.config.hidden_size
    with torch.no_grad():
        tanh.heads["sts"].head[-1].weight.fill_(1.0)
        tanh.heads["sts"].head[-1].bias.fill_(0.0)
        # pooled vectors of all +1, all −1 and 0: logits C, −C, 0 -> tanh saturates at both ends, 0 is the middle
        out = tanh.head("sts", torch.stack([torch.ones(C), -torch.ones(C), torch.zeros(C)]))
    torch.testing.assert_close(out, torch.tensor([5.0, 0.0, 2.5]), rtol=0, atol=1e-5,
                               msg="MultitaskBert(sts_head='cross_tanh'): scores must span STS's [0, 5] (middle 2.5)")


def test_the_head_options_reach_the_tanh_concat_and_siamese_heads():
    model = tiny_multitask(head="mlp", head_layers=2, head_activation="relu", dropout=0.3,
                           pair_heads={"para": "concat", "sts": "cross_tanh"}).eval()
    C = model.encoder.config.hidden_size
    assert isinstance(model.heads["sts"], TanhScaledHead) and isinstance(model.heads["para"], ConcatHead)
    for task, inner in (("sts", model.heads["sts"].head), ("para", model.heads["para"].head)):
        assert sum(isinstance(m, nn.ReLU) for m in inner) == 2, f"{task}: --head_layers 2 --head_activation relu must reach it"
    assert model.heads["para"].head[1].in_features == 2 * C and model.heads["para"].head[-1].out_features == 1
    assert model("para", pair_batch()).shape == (4,) and model("sts", make_batch("sts")).shape == (4,)
    siamese = tiny_multitask(dropout=0.3, pair_heads={"para": "siamese", "sts": "siamese"}).eval()
    for task in ("para", "sts"):
        mlp = siamese.heads[task].mlp
        assert isinstance(siamese.heads[task], SiameseHead) and mlp[0].in_features == 4 * C and mlp[2].p == 0.3 \
            and mlp[3].out_features == 1, f"siamese {task}: expected Linear(4C, C) ... Dropout(0.3) ... Linear(C, 1)"
        assert siamese(task, pair_batch()).shape == (4,)


def test_unknown_pair_heads_list_the_choices_of_their_task():
    with pytest.raises(ValueError, match=r"^pair head for para must be one of \['cross', 'cosine', 'dot', 'concat', "
                                         r"'siamese'\], got 'cross_tanh'$"):
        tiny_multitask(pair_heads={"para": "cross_tanh"})
    with pytest.raises(ValueError, match=r"^pair head for sts must be one of \['cross', 'cross_tanh', 'cosine', 'dot', "
                                         r"'concat', 'siamese'\], got 'bogus'$"):
        tiny_multitask(pair_heads={"sts": "bogus"})


def test_constructor_defaults_and_errors():
    model = tiny_multitask()
    assert all(p.requires_grad for p in model.encoder.parameters()), "MultitaskBert: the encoder trains by default"
    assert all(not p.requires_grad for p in tiny_multitask(frozen_encoder=True).encoder.parameters()), \
        "MultitaskBert(frozen_encoder=True): no encoder weight may train"
    mlp = tiny_multitask(head="mlp")
    assert sum(isinstance(m, nn.Linear) for m in mlp.heads["sst"]) == 2, "head='mlp' defaults to one hidden layer"
    with pytest.raises(ValueError, match=r"^pooling must be one of \('pooler', 'mean'\), got 'max'$"):
        tiny_multitask(pooling="max")
    with pytest.raises(ValueError, match=r"^head must be 'linear' or 'mlp', got 'deep'$"):
        make_head("deep", 8, 1, 0.1)


# ---------------------------------------------------------------------------- what reaches the encoder
@pytest.mark.parametrize("pooling", ["pooler", "mean"])
def test_cross_features_are_the_encoder_output_on_ids_types_and_mask(pooling):
    """Oracle: BertModel run directly. pooler -> its pooler_output; mean -> the mean of last_hidden_state over
    the real tokens (example 0 is padded after 8 tokens; the batch has token types 1 from position 6)."""
    model = tiny_multitask(pooling=pooling).eval()
    b = make_batch("sst")
    with torch.no_grad():
        u, v = model.features("sst", b)
        ref = encoder_out(model, b["input_ids"], b["attention_mask"], b["token_type_ids"])
    want = ref["pooler_output"] if pooling == "pooler" else torch.stack(
        [ref["last_hidden_state"][i, b["attention_mask"][i].bool()].mean(0) for i in range(4)])
    assert v is None
    torch.testing.assert_close(u, want, rtol=0, atol=1e-5, msg=f"MultitaskBert.features({pooling!r}): expected the "
                               "encoder's output on the batch's ids, token types and attention mask")


def test_padding_never_changes_a_pooled_vector():
    """Oracle: property. Example 0 of make_batch has 8 real tokens: encoded alone (no pads) it gives the same vector."""
    for pooling in ("pooler", "mean"):
        model = tiny_multitask(pooling=pooling).eval()
        b = make_batch("sst")
        alone = {k: v[:1, :8] for k, v in b.items() if k != "labels"}
        with torch.no_grad():
            torch.testing.assert_close(model.features("sst", b)[0][:1], model.features("sst", alone)[0], rtol=0, atol=1e-5,
                                       msg=f"MultitaskBert.features({pooling!r}): pads changed the vector (is the mask passed?)")


@pytest.mark.parametrize("pooling", ["pooler", "mean"])
def test_bi_encoder_features_encode_each_sentence_alone(pooling):
    """Oracle: each sentence through BertModel on its own, without its padding (example 1's b has 5 real tokens)."""
    model = tiny_multitask(pooling=pooling, pair_heads={"sts": "cosine"}).eval()
    b = pair_batch()
    with torch.no_grad():
        u, v = model.features("sts", b)
        for i in range(4):
            for got, ids, mask, types in ((u, "input_ids", "attention_mask", "token_type_ids"),
                                          (v, "input_ids_b", "attention_mask_b", "token_type_ids_b")):
                n = int(b[mask][i].sum())
                ref = encoder_out(model, b[ids][i:i + 1, :n], None, b[types][i:i + 1, :n])
                want = ref["pooler_output"][0] if pooling == "pooler" else ref["last_hidden_state"][0].mean(0)
                torch.testing.assert_close(got[i], want, rtol=0, atol=1e-5,
                                           msg=f"MultitaskBert.features (bi-encoder, {pooling}): {ids}[{i}] encoded alone differs")


@pytest.mark.parametrize("pair_head", ["cross", "cosine"])
def test_smart_embeds_round_trip_and_reach_the_encoder(pair_head):
    """Oracle: property. features(embeds=inputs(batch)) is features(batch); a perturbed embeds changes forward's
    output exactly as running the encoder on the perturbed embedding output (BertModel.encode) does."""
    model = tiny_multitask(pair_heads={"sts": pair_head}).eval()
    b = pair_batch() if pair_head == "cosine" else make_batch("sts")
    with torch.no_grad():
        x = model.inputs("sts", b)
        T = b["input_ids"].shape[1] + (b["input_ids_b"].shape[1] if pair_head == "cosine" else 0)
        assert x.shape == (4, T, model.encoder.config.hidden_size), f"inputs: expected (B, {T}, C), got {tuple(x.shape)}"
        torch.testing.assert_close(model("sts", b, embeds=x), model("sts", b), rtol=0, atol=1e-5)
        noisy = x + 0.5 * torch.randn(x.shape, generator=torch.Generator().manual_seed(3))
        got = model("sts", b, embeds=noisy)
        Ta = b["input_ids"].shape[1]
        u = model.encoder.encode(noisy[:, :Ta], b["attention_mask"])["pooler_output"]
        if pair_head == "cross":
            want = model.heads["sts"](u).squeeze(-1)
        else:
            want = model.heads["sts"](u, model.encoder.encode(noisy[:, Ta:], b["attention_mask_b"])["pooler_output"]).squeeze(-1)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-5, msg="MultitaskBert.forward(embeds=...): the embeds must replace the embedding output")
    assert not torch.allclose(got, model("sts", b).detach(), atol=1e-4), "a perturbed embeds must change the output"


def test_r3f_word_embeds_replace_the_word_lookup():
    """Oracle: the word-embedding table. Passing the looked-up rows gives the same output; shifted rows do not."""
    model = tiny_multitask().eval()
    b = make_batch("sst")
    with torch.no_grad():
        w = model.encoder.embeddings.word_embedding(b["input_ids"])     # (B, T, C)
        torch.testing.assert_close(model("sst", b, word_embeds=w), model("sst", b), rtol=0, atol=1e-6)
        noisy = w + torch.randn(w.shape, generator=torch.Generator().manual_seed(0))   # not a constant: LayerNorm removes those
        assert not torch.allclose(model("sst", b, word_embeds=noisy), model("sst", b), atol=1e-4), \
            "MultitaskBert.forward(word_embeds=...) must reach the embedding layer"


def test_a_frozen_encoder_without_pals_keeps_no_graph():
    """Documented: with frozen_encoder and no PALs the encoder runs under no_grad, even on SMART's embeds."""
    model = tiny_multitask(frozen_encoder=True).eval()
    b = make_batch("sst")
    x = model.inputs("sst", b).detach().requires_grad_(True)
    u, _ = model.features("sst", b, embeds=x)
    assert not u.requires_grad, "MultitaskBert(frozen_encoder=True).features: the encoder must run without a graph"
    assert tiny_multitask().eval().features("sst", b, embeds=x)[0].requires_grad, "a trained encoder keeps its graph"


def test_the_handout_method_names_run_their_task():
    model = tiny_multitask().eval()
    with torch.no_grad():
        for name, task in (("predict_sentiment", "sst"), ("predict_paraphrase", "para"), ("predict_similarity", "sts")):
            b = make_batch(task)
            torch.testing.assert_close(getattr(model, name)(b), model(task, b), rtol=0, atol=0, msg=f"MultitaskBert.{name}")


# ---------------------------------------------------------------------------- predictions, devices, groups
def test_paraphrase_prediction_is_the_handouts_rounded_sigmoid():
    """Oracle: the handout's `logits.sigmoid().round()`: a logit of exactly 0 gives σ = 0.5, rounded to 0."""
    logits = torch.tensor([0.0, 1e-3, -1e-3, 4.0])
    assert predictions("para", logits) == logits.sigmoid().round().long().tolist() == [0, 1, 0, 1]


def test_to_device_moves_tensors_and_keeps_the_rest():
    batch = {"input_ids": torch.ones(2, 3, dtype=torch.long), "ids": ["a", "b"]}
    moved = to_device(batch, torch.device("meta"))
    assert moved["input_ids"].device.type == "meta" and moved["input_ids"].shape == (2, 3)
    assert moved["ids"] == ["a", "b"] and moved["input_ids"].dtype == torch.long


def test_gradvac_groups_default_and_error():
    model = tiny_multitask()
    params = list(model.parameters())
    assert gradvac_groups(model, params) is None, "gradvac_groups: the default level 'model' is one group (None)"
    with pytest.raises(ValueError, match=r"level must be one of \('model', 'layer', 'matrix'\), got 'rows'"):
        gradvac_groups(model, params, "rows")


# ---------------------------------------------------------------------------- flags
def parser():
    p = argparse.ArgumentParser()
    multitask.add_args(p)
    return p


def test_model_flags_defaults_build_the_handout_model():
    args = parser().parse_args([])
    assert vars(args) == {"option": "finetune", "head": "linear", "head_layers": 1, "head_activation": "gelu",
                          "pooling": "pooler", "para_head": "cross", "sts_head": "cross", "fast_attention": False,
                          "freeze_word_embeddings": False}, vars(args)


def test_model_flags_accept_every_documented_choice():
    p = parser()
    for argv in (["--option", "finetune", "--head", "linear", "--head_layers", "1"],
                 ["--option", "pretrain", "--head", "mlp", "--head_layers", "3"]):
        args = p.parse_args(argv)
        assert (args.option, args.head, args.head_layers) == (argv[1], argv[3], int(argv[5])), vars(args)


@pytest.mark.parametrize("argv", [["--option", "frozen"], ["--head", "deep"], ["--head_layers", "0"],
                                  ["--head_activation", "tanh"], ["--pooling", "max"], ["--para_head", "bogus"],
                                  ["--sts_head", "bogus"]])
def test_model_flags_refuse_bad_values(argv, capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(argv)
    assert argv[0] in capsys.readouterr().err


def test_model_flags_reach_the_model():
    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    argv = ["--option", "pretrain", "--head", "mlp", "--head_layers", "2", "--head_activation", "relu",
            "--pooling", "mean", "--para_head", "cosine", "--sts_head", "cross_tanh", "--fast_attention"]
    p = parser()
    args = p.parse_args(argv)
    multitask.check_args(args, p)
    args.max_seq_len, args.model, args.hidden_dropout_prob = 64, "tiny", 0.2
    torch.manual_seed(0)
    model = multitask.from_args(args, BertModel(BertConfig.tiny()))
    assert model.frozen_encoder and model.pooling == "mean" and model.pair_heads == {"para": "cosine", "sts": "cross_tanh"}
    assert isinstance(model.heads["para"], CosineHead) and isinstance(model.heads["sts"], TanhScaledHead)
    sst = model.heads["sst"]
    assert sum(isinstance(m, nn.ReLU) for m in sst) == 2 and all(m.p == 0.2 for m in sst if isinstance(m, nn.Dropout))
    assert all(not q.requires_grad for q in model.encoder.parameters())
    pals = nn.Identity()   # any module: from_args hands the PALs it is given to the model
    assert multitask.from_args(args, BertModel(BertConfig.tiny()), pals=pals).pals is pals
    args.max_seq_len = 128   # every position of the table may be used
    assert multitask.from_args(args, BertModel(BertConfig.tiny())).encoder.config.max_position_embeddings == 128
    args.max_seq_len = 129
    with pytest.raises(UserError, match=r"--max_seq_len 129: tiny has only 128 positions"):
        multitask.from_args(args, BertModel(BertConfig.tiny()))


def test_para_head_cross_tanh_is_refused_with_the_sts_flag_to_use(capsys):
    p = parser()
    with pytest.raises(SystemExit):
        multitask.check_args(p.parse_args(["--para_head", "cross_tanh"]), p)
    assert "error: --para_head cross_tanh: the tanh-scaled head is for STS scores; use --sts_head cross_tanh\n" \
        in capsys.readouterr().err
    multitask.check_args(p.parse_args(["--sts_head", "cross_tanh"]), p)   # accepted


def test_pals_of_the_task_reach_the_encoder_and_only_that_task():
    """Oracle: the model without PALs (pals=None) on the same weights, and properties: each task has its own PALs,
    so sst and para vectors differ; with zeroed up-projections V_D (TS(h) = GELU(0) = 0) the PALs add nothing;
    padding still changes nothing (the mask reaches the PALs); a frozen encoder with PALs keeps the graph."""
    from minbert.bert.config import BertConfig
    from minbert.bert.model import BertModel
    from minbert.methods.pals import PALs
    torch.manual_seed(0)
    cfg = BertConfig.tiny()
    pals = PALs(cfg, list(multitask.TASKS), size=12, heads=3)
    model = MultitaskBert(BertModel(cfg), pals=pals, pair_heads={"sts": "cosine"}, frozen_encoder=True).eval()
    b, pair = make_batch("sst"), pair_batch()
    with torch.no_grad():
        sst, para, (_, v) = model.features("sst", b)[0], model.features("para", b)[0], model.features("sts", pair)
        model.pals = None
        plain, (plain_u, plain_v) = model.features("sst", b)[0], model.features("sts", pair)
        model.pals = pals
    assert not torch.allclose(sst, para, atol=1e-6), "the sst and para PALs differ, so their vectors must differ"
    assert not torch.allclose(sst, plain, atol=1e-6), "MultitaskBert.pooled: the task's PALs must reach the encoder"
    assert not torch.allclose(v, plain_v, atol=1e-6), "bi-encoder: sentence b must go through the task's PALs too"
    alone = {k: t[:1, :8] for k, t in b.items() if k != "labels"}
    with torch.no_grad():
        torch.testing.assert_close(model.features("sst", b)[0][:1], model.features("sst", alone)[0], rtol=0, atol=1e-5,
                                   msg="MultitaskBert.pooled with PALs: pads changed the vector (the PALs need the mask)")
        pals.V_D["sts"].weight.zero_()
        pals.V_D["sts"].bias.zero_()
        u0, v0 = model.features("sts", pair)
    torch.testing.assert_close((u0, v0), (plain_u, plain_v), rtol=0, atol=1e-6,
                               msg="PALs whose V_D is zero add GELU(0) = 0: the vectors of the model without PALs")
    assert model.features("sst", b)[0].requires_grad, "a frozen encoder with PALs must keep the graph for the PALs"
