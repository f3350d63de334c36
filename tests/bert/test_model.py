"""Grades minbert.bert.model.BertModel (with minbert.bert.layers) against Hugging Face `transformers`.

Oracle (b), live: HF `BertModel` loaded from the same weights — the packaged MiniLM checkpoint
(minilm-l6, offline) and a random bert-base-sized model exported by us in HF naming.
Hidden-state parity, not "it runs", is what grades the model. Compared: last_hidden_state at
real (non-padded) positions and pooler_output, fp32, eval mode, atol 1e-5.
"""

import pytest
import torch

from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer

ATOL, RTOL = 1e-5, 1e-4

SENTENCES = ["The movie was surprisingly good.", "A dull, lifeless plot.",
             "I'd watch it again — twice!", "Meh."]
PAIRS = [("How do I learn Python?", "What is the best way to learn Python?"),
         ("A man is playing a guitar.", "A woman is slicing an onion."),
         ("Is it raining?", "Is it raining in Paris today, or is the forecast wrong again?")]


@pytest.fixture(scope="module")
def minilm_pair():
    from transformers import BertModel as HFBertModel
    from minbert.core import hub
    ours = BertModel.from_pretrained("minilm-l6").eval()
    theirs = HFBertModel.from_pretrained(str(hub.resolve("minilm-l6"))).eval()
    return ours, theirs, Tokenizer.from_pretrained("minilm-l6")


def compare(ours, theirs, batch, what):
    with torch.no_grad():
        a = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
        b = theirs(**batch)
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(a["last_hidden_state"][real], b.last_hidden_state[real], atol=ATOL, rtol=RTOL,
                               msg=lambda m: f"minbert.bert.model.BertModel.forward: last_hidden_state differs from HF on {what}:\n{m}")
    torch.testing.assert_close(a["pooler_output"], b.pooler_output, atol=ATOL, rtol=RTOL,
                               msg=lambda m: f"minbert.bert.layers.Pooler.forward: pooler_output differs from HF on {what}:\n{m}")


@pytest.mark.parametrize("fast", [False, True], ids=["explicit", "fast"])
def test_minilm_matches_hf_on_padded_sentences_and_pairs(minilm_pair, fast):
    ours, theirs, tok = minilm_pair
    for layer in ours.layers:
        layer.self_attention.fast = fast
    compare(ours, theirs, tok(SENTENCES), "single sentences")
    compare(ours, theirs, tok([a for a, _ in PAIRS], [b for _, b in PAIRS]), "sentence pairs")


def test_random_bert_base_exported_in_hf_naming_matches_hf(tmp_path):
    """A random bert-base-sized model, saved by BertModel.save_pretrained, loaded by both."""
    from transformers import BertModel as HFBertModel
    torch.manual_seed(0)
    BertModel(BertConfig()).save_pretrained(tmp_path)
    ours = BertModel.from_pretrained(tmp_path).eval()
    theirs = HFBertModel.from_pretrained(str(tmp_path)).eval()
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(1000, 30000, (2, 16), generator=g)
    am = torch.ones_like(ids)
    am[1, 9:] = 0
    types = (torch.arange(16) >= 8).long().expand(2, 16)
    compare(ours, theirs, {"input_ids": ids, "attention_mask": am, "token_type_ids": types}, "random bert-base")


def test_padding_is_inert(minilm_pair):
    """Property: changing the ids under padding changes nothing at real positions."""
    ours = minilm_pair[0]
    batch = minilm_pair[2](SENTENCES)
    ids2 = batch["input_ids"].clone()
    pads = batch["attention_mask"] == 0
    ids2[pads] = 2023
    with torch.no_grad():
        a = ours(batch["input_ids"], batch["attention_mask"])["last_hidden_state"]
        b = ours(ids2, batch["attention_mask"])["last_hidden_state"]
    d = (a - b)[~pads].abs().max().item()
    assert d < 1e-5, f"minbert.bert.model.BertModel.forward: ids under padding changed real positions (max |Δ| = {d:.2e}); is the attention mask applied?"


def test_token_type_ids_change_the_output(minilm_pair):
    ours = minilm_pair[0]
    batch = minilm_pair[2]([a for a, _ in PAIRS], [b for _, b in PAIRS])
    with torch.no_grad():
        a = ours(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["last_hidden_state"]
        b = ours(batch["input_ids"], batch["attention_mask"], torch.zeros_like(batch["token_type_ids"]))["last_hidden_state"]
    assert (a - b).abs().max() > 1e-3, "minbert.bert.layers.Embeddings.forward: token_type_ids are ignored (the CS224N handout's bug)"


def test_from_pretrained_returns_train_mode_and_dropout_is_active():
    m = BertModel.from_pretrained("minilm-l6")
    assert m.training, "minbert.bert.model.BertModel.from_pretrained must return the model in train mode (documented)"
    ids = torch.tensor([[101, 2023, 2003, 1037, 3231, 102]])
    with torch.no_grad():
        assert not torch.equal(m(ids)["last_hidden_state"], m(ids)["last_hidden_state"]), "dropout should be active in train mode"
        m.eval()
        assert torch.equal(m(ids)["last_hidden_state"], m(ids)["last_hidden_state"]), "eval mode must be deterministic"


def test_bf16_autocast_forward_backward_runs_on_cpu_and_is_close_to_fp32(minilm_pair):
    ours, _, tok = minilm_pair
    batch = tok(SENTENCES)
    args = (batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])
    with torch.no_grad():
        ref = ours(*args)["last_hidden_state"]
    ours.zero_grad()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = ours(*args)["last_hidden_state"]
    out.float().pow(2).mean().backward()
    grads = [p.grad for p in ours.parameters() if p.grad is not None]
    ours.zero_grad()
    real = batch["attention_mask"].bool()
    d = (out.float() - ref)[real].abs().max().item()
    # bf16 has an 8-bit mantissa (~3 significant digits); MiniLM's hidden states are O(1).
    assert d < 0.15, f"minbert.bert.model.BertModel under bf16 autocast: max |Δ| vs fp32 = {d:.3f} (tol 0.15)"
    assert grads and all(torch.isfinite(g).all() for g in grads), "bf16 backward produced no or non-finite gradients"


# ---------------------------------------------------------------------- checkpoint loading

def tiny_checkpoint(tmp_path, rename=lambda k: k, drop=(), extra=None, fmt="safetensors"):
    """Save a tiny random model in HF naming, with its keys transformed; return (model, dir)."""
    from safetensors.torch import save_file
    from minbert.bert.model import checkpoint_names
    torch.manual_seed(0)
    model = BertModel(BertConfig.tiny()).eval()
    model.save_pretrained(tmp_path)   # writes config.json (and an HF-named safetensors we replace)
    (tmp_path / "model.safetensors").unlink()
    names = checkpoint_names(model.config)
    state = {rename(names[k]): v.clone() for k, v in model.state_dict().items() if names[k] not in drop}
    state.update(extra or {})
    if fmt == "bin":
        torch.save(state, tmp_path / "pytorch_model.bin")
    else:
        save_file(state, tmp_path / "model.safetensors")
    return model, tmp_path


def same_outputs(a, b):
    ids = torch.tensor([[101, 7592, 2088, 102, 0]])
    am = (ids != 0).long()
    with torch.no_grad():
        return torch.equal(a.eval()(ids, am)["last_hidden_state"], b.eval()(ids, am)["last_hidden_state"])


def original_release_names(k):
    return "bert." + k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta")


@pytest.mark.parametrize("fmt", ["safetensors", "bin"])
@pytest.mark.parametrize("style", ["current", "original_release"])
def test_loads_both_key_styles_with_or_without_prefix(tmp_path, fmt, style):
    rename = (lambda k: k) if style == "current" else original_release_names
    head = {"cls.predictions.bias": torch.zeros(30522)}   # pre-training heads are ignored
    model, d = tiny_checkpoint(tmp_path, rename=rename, extra=head, fmt=fmt)
    loaded = BertModel.from_pretrained(d)
    assert same_outputs(model, loaded), f"minbert.bert.model.from_checkpoint_names: {style} names in .{fmt} loaded to different weights"


def test_loads_a_weights_file_path_directly(tmp_path):
    model, d = tiny_checkpoint(tmp_path)
    assert same_outputs(model, BertModel.from_pretrained(d / "model.safetensors"))


def test_missing_pooler_is_initialised_and_reported(tmp_path):
    model, d = tiny_checkpoint(tmp_path, drop=("pooler.dense.weight", "pooler.dense.bias"))
    with pytest.warns(UserWarning, match="no pooler weights"):
        loaded = BertModel.from_pretrained(d)
    assert same_outputs(model, loaded), "minbert.bert.model.from_checkpoint_names: encoder weights must still load without a pooler"


def test_missing_unexpected_and_misshapen_keys_are_all_listed(tmp_path):
    bad = {"encoder.layer.0.attention.self.query.weight": torch.zeros(3, 3),   # wrong shape
           "encoder.layer.9.surprise.weight": torch.zeros(1)}                  # unexpected
    _, d = tiny_checkpoint(tmp_path, drop=("encoder.layer.1.output.dense.bias",), extra=bad)
    from minbert.bert.model import CheckpointError
    with pytest.raises(CheckpointError) as e:
        BertModel.from_pretrained(d)
    msg = str(e.value)
    for expected in ("missing: encoder.layer.1.output.dense.bias",
                     "unexpected: encoder.layer.9.surprise.weight",
                     "shape mismatch: encoder.layer.0.attention.self.query.weight: checkpoint (3, 3), model (32, 32)"):
        assert expected in msg, f"minbert.bert.model.from_checkpoint_names: error should contain {expected!r}, got:\n{msg}"


def test_config_rejects_unsupported_activation(tmp_path):
    import json
    (tmp_path / "config.json").write_text(json.dumps({"hidden_act": "relu"}))
    with pytest.raises(ValueError, match="hidden_act"):
        BertConfig.from_json(tmp_path / "config.json")


# ---------------------------------------------------------------------- the graded forward

def test_encode_matches_stored_reference():
    """Oracle (a): the stored HF outputs of tests/fixtures/bert_tiny_reference.npz (no transformers
    needed). encode runs from the stored embedding output, so this grade does not depend on
    assignment 1, and with fast_attention=True not on assignment 2."""
    from test_layers import max_diff, reference   # tests/ is on sys.path under pytest
    ref, model = reference()
    real = ref["attention_mask"].bool()
    with torch.no_grad():
        out = model.encode(ref["embeddings"], ref["attention_mask"])
    where = "minbert.bert.model.BertModel.encode"
    got = out["last_hidden_state"][real]
    hint = ""
    if got.shape == ref["hidden_1"][real].shape and max_diff(got, ref["hidden_1"][real]) <= ATOL:
        hint = " (hint: that is the output of the first layer only: run every layer, each on the previous output)"
    torch.testing.assert_close(got, ref["hidden_2"][real], atol=ATOL, rtol=RTOL, msg=lambda m:
        f"{where}: last_hidden_state differs from the stored HF output at real positions{hint}\n{m}")
    torch.testing.assert_close(out["pooler_output"], ref["pooler_output"], atol=ATOL, rtol=RTOL, msg=lambda m:
        f"{where}: pooler_output differs from HF: the pooler reads the LAST layer's output\n{m}")
    with torch.no_grad():
        no_mask = model.encode(ref["embeddings"][:1])["last_hidden_state"]
    torch.testing.assert_close(no_mask, ref["hidden_2"][:1], atol=ATOL, rtol=RTOL, msg=lambda m:
        f"{where}: attention_mask=None must mean every token is real\n{m}")
