"""Grades minbert.bert.model.BertModel (with minbert.bert.layers) against Hugging Face `transformers`.

Oracle (b), live: HF `BertModel` loaded from the same weights — the packaged MiniLM checkpoint
(minilm-l6, offline) and a random bert-base-sized model exported by us in HF naming.
Hidden-state parity, not "it runs", is what grades the model. Compared: last_hidden_state at
real (non-padded) positions and pooler_output, fp32, eval mode, atol 1e-5.
"""

import json
import sys
import warnings

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
    try:
        compare(ours, theirs, tok(SENTENCES), "single sentences")
        compare(ours, theirs, tok([a for a, _ in PAIRS], [b for _, b in PAIRS]), "sentence pairs")
    finally:   # the fixture is shared: the tests after this one run the written-out attention, the default
        for layer in ours.layers:
            layer.self_attention.fast = False


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
    with warnings.catch_warnings():   # "gets no vocab.txt": these folders hold weights only
        warnings.filterwarnings("ignore", "BertModel.save_pretrained", UserWarning)
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


# ---------------------------------------------------------------------- written for mutation survivors
# (bench/mutation.py): the hooks other modules use (word_embeds; layer_extra's wiring is checked against the layers
# composed by hand in the instructor-only tests/classroom/test_grader_references_bert.py), the init, and the
# checkpoint files' edges.

def test_embed_with_word_embeds_matches_hf_inputs_embeds(minilm_pair):
    """Oracle (b): HF BertModel(inputs_embeds=W) puts W where the word lookup was, as embed(word_embeds=W)
    does (R3F's noise goes there); positions and token types are still added."""
    ours, theirs, tok = minilm_pair
    batch = tok([a for a, _ in PAIRS], [b for _, b in PAIRS])
    g = torch.Generator().manual_seed(0)
    W = torch.randn(*batch["input_ids"].shape, ours.config.hidden_size, generator=g) * 0.05   # (B, T, C)
    with torch.no_grad():
        x = ours.embed(batch["input_ids"], batch["token_type_ids"], word_embeds=W)
        a = ours.encode(x, batch["attention_mask"])["last_hidden_state"]
        b = theirs(inputs_embeds=W, attention_mask=batch["attention_mask"],
                   token_type_ids=batch["token_type_ids"]).last_hidden_state
    real = batch["attention_mask"].bool()
    torch.testing.assert_close(a[real], b[real], atol=ATOL, rtol=RTOL, msg=lambda m:
        f"minbert.bert.model.BertModel.embed(word_embeds=W): differs from HF's inputs_embeds=W:\n{m}")


def test_encode_builds_the_mask_in_the_hidden_states_dtype():
    """A bf16 model (weights cast, no autocast): the additive mask the layers get is bf16 too, as
    extended_attention_mask(attention_mask, x.dtype) makes it, so scores + mask stays in bf16."""
    torch.manual_seed(0)
    model = BertModel(BertConfig.tiny()).to(torch.bfloat16).eval()
    seen = []
    model.layers[0].register_forward_pre_hook(lambda module, args: seen.append(args[1].dtype))
    x = torch.randn(2, 5, model.config.hidden_size, dtype=torch.bfloat16)
    with torch.no_grad():
        model.encode(x, torch.ones(2, 5, dtype=torch.long))
    assert seen == [torch.bfloat16], f"minbert.bert.model.BertModel.encode: bf16 hidden states got a {seen} mask"


def test_fresh_weights_follow_bert_s_init():
    """BERT's init (Devlin et al. 2019, as HF's _init_weights): Linear and Embedding weights N(0, initializer_range),
    Linear biases 0, LayerNorm γ = 1 and β = 0, the word embedding's pad row 0. initializer_range 0.05 (not the
    default) so a hard-coded 0.02 shows. Per tensor: std within 30% (the smallest table has 64 values), mean
    within 4 standard errors of 0."""
    torch.manual_seed(0)
    cfg = BertConfig.tiny(initializer_range=0.05)
    model = BertModel(cfg)
    for name, p in model.named_parameters():
        p = p.detach()
        where = f"minbert.bert.model.BertModel._init_weights: {name}"
        if "layer_norm" in name:
            want = torch.ones_like(p) if name.endswith("weight") else torch.zeros_like(p)
            assert torch.equal(p, want), f"{where} must start at {'1' if name.endswith('weight') else '0'}"
        elif name.endswith("bias"):
            assert torch.equal(p, torch.zeros_like(p)), f"{where} must start at 0"
        else:
            if name == "embeddings.word_embedding.weight":
                assert torch.equal(p[cfg.pad_token_id], torch.zeros(cfg.hidden_size)), f"{where}: the pad row must be 0"
                p = torch.cat([p[:cfg.pad_token_id], p[cfg.pad_token_id + 1:]])
            std, mean = p.std().item(), p.mean().item()
            assert 0.7 * 0.05 < std < 1.3 * 0.05 and abs(mean) < 4 * 0.05 / p.numel() ** 0.5, \
                f"{where}: expected N(0, 0.05), got mean {mean:.4f}, std {std:.4f}"


def test_from_pretrained_applies_the_config_overrides(tmp_path):
    _, d = tiny_checkpoint(tmp_path)
    m = BertModel.from_pretrained(d, fast_attention=True, hidden_dropout_prob=0.3)
    got = (m.config.fast_attention, m.layers[0].self_attention.fast, m.config.hidden_dropout_prob, m.embeddings.dropout.p)
    assert got == (True, True, 0.3, 0.3), \
        f"minbert.bert.model.BertModel.from_pretrained(fast_attention=True, hidden_dropout_prob=0.3): got {got}"


def test_a_half_precision_checkpoint_loads_as_fp32_weights(tmp_path):
    """Checkpoints are often stored in fp16; the model trains fp32 master weights (AMP autocasts a copy)."""
    from safetensors.torch import load_file, save_file
    model, d = tiny_checkpoint(tmp_path)
    state = load_file(str(d / "model.safetensors"))
    save_file({k: v.half() for k, v in state.items()}, str(d / "model.safetensors"))
    loaded = BertModel.from_pretrained(d)
    dtypes = {p.dtype for p in loaded.parameters()}
    assert dtypes == {torch.float32}, f"minbert.bert.model.from_checkpoint_names: an fp16 checkpoint loaded as {dtypes}"
    ids = torch.tensor([[101, 7592, 2088, 102]])
    with torch.no_grad():
        d_max = (loaded.eval()(ids)["last_hidden_state"] - model.eval()(ids)["last_hidden_state"]).abs().max().item()
    assert d_max < 1e-2, f"an fp16 copy of the weights should give nearly the same outputs (max |Δ| {d_max:.3g})"


@pytest.mark.parametrize("problem", ["missing", "unexpected", "shape"])
def test_each_checkpoint_problem_alone_is_refused_under_a_line_naming_the_file(tmp_path, problem):
    kw = {"missing": dict(drop=("encoder.layer.1.output.dense.bias",)),
          "unexpected": dict(extra={"encoder.layer.9.surprise.weight": torch.zeros(1)}),
          "shape": dict(extra={"pooler.dense.bias": torch.zeros(3)})}[problem]
    want = {"missing": "  missing: encoder.layer.1.output.dense.bias",
            "unexpected": "  unexpected: encoder.layer.9.surprise.weight",
            "shape": "  shape mismatch: pooler.dense.bias: checkpoint (3,), model (32,)"}[problem]
    _, d = tiny_checkpoint(tmp_path, **kw)
    from minbert.bert.model import CheckpointError
    with pytest.raises(CheckpointError) as e:
        BertModel.from_pretrained(d)
    lines = str(e.value).splitlines()
    fn = "minbert.bert.model.from_checkpoint_names"
    assert lines[0].startswith(str(d / "model.safetensors")) and "2 layers" in lines[0] and "hidden 32" in lines[0], \
        f"{fn}: the first line must name the weights file and the model (2 layers, hidden 32), got:\n{e.value}"
    assert lines[1:] == [want], f"{fn}: expected the one line {want!r} under it, got:\n{e.value}"


def test_missing_pooler_is_drawn_from_n_0_initializer_range_and_the_warning_names_the_file(tmp_path):
    """BERT's init for the pooler a checkpoint lacks: weight N(0, 0.02) (1024 values: std within 15%, mean
    within 4 standard errors), bias 0. The warning names the weights file."""
    _, d = tiny_checkpoint(tmp_path, drop=("pooler.dense.weight", "pooler.dense.bias"))
    torch.manual_seed(0)
    with pytest.warns(UserWarning, match="no pooler weights") as record:
        loaded = BertModel.from_pretrained(d)
    fn = "minbert.bert.model.from_checkpoint_names"
    w, b = loaded.pooler.dense.weight.detach(), loaded.pooler.dense.bias.detach()
    assert 0.017 < w.std().item() < 0.023 and abs(w.mean().item()) < 4 * 0.02 / 32, \
        f"{fn}: the missing pooler weight must be N(0, 0.02), got mean {w.mean().item():.4f}, std {w.std().item():.4f}"
    assert torch.equal(b, torch.zeros(32)), f"{fn}: the missing pooler bias must be 0"
    warning = next(r for r in record if "no pooler weights" in str(r.message))
    assert str(d / "model.safetensors") in str(warning.message) and "[CLS] hidden state" in str(warning.message), \
        f"{fn}: the warning must name the file and advise the [CLS] hidden state, got {warning.message}"


def test_a_bin_checkpoint_cannot_run_code_while_loading(tmp_path):
    """A .bin is a pickle: loaded with weights_only, a pickle that would call open() is refused, as a
    CheckpointError, and nothing runs."""
    marker = tmp_path / "code-ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    _, d = tiny_checkpoint(tmp_path / "model", fmt="bin", extra={"payload": Payload()})
    from minbert.bert.model import CheckpointError
    with pytest.raises(CheckpointError):
        BertModel.from_pretrained(d)
    assert not marker.exists(), "minbert.bert.model.read_state_dict ran code from a .bin (torch.load needs weights_only=True)"


def test_an_unreadable_weights_file_names_the_file_and_the_library_s_error(tmp_path):
    from safetensors.torch import load_file
    from minbert.bert.model import CheckpointError
    _, d = tiny_checkpoint(tmp_path)
    path = d / "model.safetensors"
    path.write_bytes(b"<html>404 Not Found</html>")
    try:
        load_file(str(path))
    except Exception as err:   # the library's own words for this file
        error = err
    with pytest.raises(CheckpointError) as e:
        BertModel.from_pretrained(d)
    msg = str(e.value)
    assert str(path) in msg and type(error).__name__ in msg and str(error)[:40] in msg, \
        f"minbert.bert.model.read_state_dict: the message must name {path}, {type(error).__name__} and its text, got {msg}"


def test_save_pretrained_copies_the_loaded_checkpoint_s_tokenizer_unless_one_is_given(tmp_path):
    """A model loaded from a folder with vocab.txt saves a complete folder (no warning), into folders it
    makes; a tokenizer passed in wins over the one it was loaded with."""
    from conftest import save_tiny_model
    source = save_tiny_model(tmp_path / "source")          # vocab.txt, no tokenizer_config.json: uncased
    model = BertModel.from_pretrained(source)
    out = tmp_path / "runs" / "copy"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.save_pretrained(out)
    fn = "minbert.bert.model.BertModel.save_pretrained"
    assert (out / "vocab.txt").read_bytes() == (source / "vocab.txt").read_bytes(), f"{fn}: vocab.txt not copied from the source"
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is True, f"{fn}: the source's casing is lost"
    model.save_pretrained(tmp_path / "given", tokenizer=Tokenizer(source / "vocab.txt", lowercase=False))
    assert json.loads((tmp_path / "given" / "tokenizer_config.json").read_text())["do_lower_case"] is False, \
        f"{fn}(tokenizer=...): the tokenizer passed in must be the one saved"


def test_a_model_with_no_tokenizer_warns_at_the_caller_s_line(tmp_path):
    with pytest.warns(UserWarning, match="gets no vocab.txt") as record:
        BertModel(BertConfig.tiny()).save_pretrained(tmp_path)
    warning = next(r for r in record if "gets no vocab.txt" in str(r.message))
    fn = "minbert.bert.model.BertModel.save_pretrained"
    assert "pass tokenizer=" in str(warning.message), f"{fn}: the warning must say how to fix it, got {warning.message}"


@pytest.mark.skipif("mutmut" in sys.modules, reason="mutmut's trampolines add stack frames between the caller and the "
                                                    "function, so no stacklevel can point at the caller under it")
def test_warnings_point_at_the_line_that_called_minbert(tmp_path):
    """A warning's stacklevel makes Python report the user's line (from_pretrained(...), save_pretrained(...)),
    not a line inside model.py."""
    _, d = tiny_checkpoint(tmp_path / "no-pooler", drop=("pooler.dense.weight", "pooler.dense.bias"))
    with pytest.warns(UserWarning) as record:
        BertModel.from_pretrained(d)
        BertModel(BertConfig.tiny()).save_pretrained(tmp_path / "bare")
    files = [r.filename for r in record]
    assert len(files) == 2 and set(files) == {__file__}, \
        f"minbert.bert.model: the 2 warnings point at {files}, expected this test's lines ({__file__})"


def test_saved_safetensors_carry_the_metadata_hf_writes(tmp_path):
    """Oracle (b): transformers' BertModel.save_pretrained marks its safetensors {"format": "pt"}; loaders check it."""
    from safetensors import safe_open
    import transformers
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        BertModel(BertConfig.tiny()).save_pretrained(tmp_path / "ours")
    fields = {k: v for k, v in BertConfig.tiny().to_hf_dict().items() if k not in ("architectures", "model_type")}
    transformers.BertModel(transformers.BertConfig(**fields)).save_pretrained(tmp_path / "hf")
    meta = lambda folder: safe_open(str(folder / "model.safetensors"), "pt").metadata()
    assert meta(tmp_path / "ours") == meta(tmp_path / "hf"), \
        f"minbert.bert.model.BertModel.save_pretrained: safetensors metadata {meta(tmp_path / 'ours')}, HF writes {meta(tmp_path / 'hf')}"
