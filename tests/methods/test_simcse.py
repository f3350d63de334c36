"""Grades minbert.methods.simcse (SimCSE, Gao et al. 2021, arXiv:2104.08821) and minbert.tasks.embedding_eval.

Oracles: (a) a NumPy float64 reference written from the paper's Eq. 4 (unsupervised) and Eq. 5
(supervised); (c) properties: identical embeddings give loss log N (every candidate is equally
likely); with dropout off the two views are bit-identical; the gradient reaches the encoder;
alignment/uniformity on hand-computed cases (Wang & Isola 2020, Eq. 4-5).
"""

import math

import numpy as np
import pytest
import torch

from minbert.methods import simcse
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.methods.simcse import SimCSE, simcse_loss
from minbert.tasks.embedding_eval import alignment, uniformity


def reference_loss(h, h_pos, h_neg=None, tau=0.05):
    """Eq. 4 / Eq. 5 literally, in float64: a loop over anchors i and candidates j."""
    def sim(a, b):
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))
    h, h_pos = np.asarray(h, np.float64), np.asarray(h_pos, np.float64)
    losses = []
    for i in range(len(h)):
        denom = sum(math.exp(sim(h[i], h_pos[j]) / tau) for j in range(len(h)))
        if h_neg is not None:
            denom += sum(math.exp(sim(h[i], np.float64(h_neg[j])) / tau) for j in range(len(h)))
        losses.append(-math.log(math.exp(sim(h[i], h_pos[i]) / tau) / denom))
    return float(np.mean(losses))


def test_simcse_loss_of_identical_embeddings_is_log_N():
    for N in (2, 5, 16):
        h = torch.randn(1, 8).expand(N, 8)    # every view of every sentence is the same vector
        got = simcse_loss(h, h.clone()).item()
        assert abs(got - math.log(N)) < 1e-5, f"minbert.methods.simcse.simcse_loss: identical embeddings, N={N}: expected log N = {math.log(N):.6f}, got {got:.6f}"


@pytest.mark.parametrize("tau", [0.05, 0.5])
def test_simcse_loss_matches_float64_reference_of_eq4_and_eq5(tau):
    g = torch.Generator().manual_seed(0)
    h, h_pos, h_neg = (torch.randn(6, 10, generator=g, dtype=torch.float64) for _ in range(3))
    # a positive close to its anchor, so the loss is far from log N and a wrong diagonal would show
    h_pos = h + 0.3 * h_pos
    unsup = simcse_loss(h, h_pos, temperature=tau).item()
    sup = simcse_loss(h, h_pos, h_neg, temperature=tau).item()
    ref_unsup, ref_sup = reference_loss(h, h_pos, tau=tau), reference_loss(h, h_pos, h_neg, tau=tau)
    assert abs(unsup - ref_unsup) < 1e-4 * max(1, ref_unsup), \
        f"minbert.methods.simcse.simcse_loss (unsupervised, Eq. 4, τ={tau}): expected {ref_unsup:.6f}, got {unsup:.6f}"
    assert abs(sup - ref_sup) < 1e-4 * max(1, ref_sup), \
        f"minbert.methods.simcse.simcse_loss (supervised, Eq. 5, τ={tau}): expected {ref_sup:.6f}, got {sup:.6f}"


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    tok = Tokenizer.from_pretrained("minilm-l6")
    return SimCSE(BertModel(BertConfig.tiny())), tok


def test_simcse_views_differ_only_by_dropout(tiny):
    model, tok = tiny
    batch = tok(["a good movie", "the plot was dull and the actors bored", "fun"])
    model.train()
    a, b = model(batch), model(batch)
    assert not torch.equal(a, b), "minbert.methods.simcse.SimCSE.forward: with dropout on, two passes of one batch must differ (dropout is the augmentation)"
    model.eval()   # dropout off: the two views are the same function of the same input
    a, b = model(batch), model(batch)
    assert torch.equal(a, b), "minbert.methods.simcse.SimCSE.forward: with dropout off the two views must be identical"
    same = tok(["the same sentence"] * 4)   # four copies: every candidate is equally similar
    got = model.loss(same).item()
    assert abs(got - math.log(4)) < 1e-4, f"minbert.methods.simcse.SimCSE.loss: dropout off, 4 copies of one sentence: expected log 4, got {got}"
    model.train()


def test_simcse_gradient_reaches_the_encoder(tiny):
    model, tok = tiny
    model.zero_grad()
    model.loss(tok(["a good movie", "a bad movie", "an awful film", "a fun story"])).backward()
    for name in ("embeddings.word_embedding.weight", "layers.0.self_attention.query.weight", "layers.1.out_dense.weight"):
        grad = model.encoder.get_parameter(name).grad
        assert grad is not None and grad.abs().sum() > 0, f"minbert.methods.simcse.SimCSE.loss: no gradient reached encoder.{name}"


def test_alignment_and_uniformity_match_hand_computation():
    x = torch.tensor([[1.0, 0.0], [0.0, 2.0]])            # unit directions e1, e2 (scale is ignored)
    assert alignment(x, x * 3) == pytest.approx(0.0, abs=1e-12), "minbert.tasks.embedding_eval.alignment: identical directions must give 0"
    # ||e1 - e2||² = 2 for the one pair -> align = 2; uniform = log exp(-2·2) = -4
    assert alignment(x[:1], x[1:]) == pytest.approx(2.0), "minbert.tasks.embedding_eval.alignment: e1 vs e2: expected 2"
    assert uniformity(x) == pytest.approx(-4.0), "minbert.tasks.embedding_eval.uniformity: {e1, e2}: expected -4"
    # three points: e1, e2, -e1: squared distances 2, 4, 2 -> log mean(e^-4, e^-8, e^-4)
    y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    expected = math.log((2 * math.exp(-4) + math.exp(-8)) / 3)
    assert uniformity(y) == pytest.approx(expected), f"minbert.tasks.embedding_eval.uniformity: expected {expected}"


def test_read_nli_requires_simcse_columns(tmp_path):
    good = tmp_path / "nli.csv"
    good.write_text("sent0,sent1,hard_neg\nA man sings.,Someone sings.,Nobody sings.\n")
    assert simcse.read_nli(str(good)) == [("A man sings.", "Someone sings.", "Nobody sings.")]
    bad = tmp_path / "bad.csv"
    bad.write_text("premise,hypothesis\nx,y\n")
    with pytest.raises(simcse.UserError, match="sent0, sent1, hard_neg"):
        simcse.read_nli(str(bad))


# ---------------------------------------------------------------------------- the stage's flags (issue 19)
@pytest.fixture(scope="module")
def stage_inputs(tmp_path_factory):
    """CS224N-format files and a tiny model folder (MiniLM's vocabulary), as test_train_multitask's."""
    from test_ensemble import tiny_run_inputs
    return tiny_run_inputs(tmp_path_factory.mktemp("simcse"))


def run_stage(stage_inputs, out, *extra):
    data, model = stage_inputs
    return simcse.main(["--model", str(model), "--data_dir", str(data), "--limit", "8", "--batch_size", "4",
                        "--max_steps", "1", "--device", "cpu", "--amp", "off", "--seed", "5", "--out_dir", str(out), *extra])


def test_temperature_flag_reaches_the_loss(stage_inputs, tmp_path):
    """python -m minbert simcse --temperature τ: the same seed (same batch, same dropout masks) with
    τ 0.1 and τ 0.05 must give different first-step losses; the old code parsed τ and used 0.05."""
    a = run_stage(stage_inputs, tmp_path / "t05", "--temperature", "0.05")["final_loss"]
    b = run_stage(stage_inputs, tmp_path / "t10", "--temperature", "0.1")["final_loss"]
    again = run_stage(stage_inputs, tmp_path / "t05b", "--temperature", "0.05")["final_loss"]
    assert a == pytest.approx(again, abs=1e-6), f"minbert.methods.simcse.main: the same seed and τ must repeat the loss, got {a} and {again}"
    assert abs(a - b) > 1e-4, f"minbert.methods.simcse.main: --temperature 0.1 and 0.05 gave the same loss {a}: τ never reaches the loss"


def test_model_temperature_is_the_loss_temperature(tiny):
    model, tok = tiny
    model.eval()
    batch = tok(["a good movie", "a bad movie", "an awful film"])
    h = model(batch)
    for tau in (0.05, 0.1, 0.7):
        model.temperature = tau
        torch.testing.assert_close(model.loss(batch), simcse_loss(h, h, temperature=tau),
                                   msg=f"minbert.methods.simcse.SimCSE.loss must use its temperature {tau} (Eq. 4)")
    model.temperature = simcse.TEMPERATURE
    model.train()


def test_keep_mlp_makes_the_pooler_the_training_representation(tiny):
    """SimCSE App. A: supervised SimCSE keeps the MLP at test time; here it becomes the pooler."""
    model, tok = tiny
    model.eval()
    batch = tok(["a good movie", "the plot was dull"])
    model.keep_mlp()
    pooled = model.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]
    torch.testing.assert_close(pooled, model(batch), msg="minbert.methods.simcse.SimCSE.keep_mlp: the pooler output must equal MLP([CLS])")
    model.train()


def nli_file(path):
    rows = ["sent0,sent1,hard_neg"] + [f"a man plays song {i},someone plays music {i},nobody plays anything {i}" for i in range(8)]
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def test_supervised_export_keeps_the_mlp_and_unsupervised_drops_it(stage_inputs, tmp_path):
    from safetensors.torch import load_file
    _, model = stage_inputs
    before = load_file(str(model / "model.safetensors"))

    def pooler(out):
        return load_file(str(out / "model" / "model.safetensors"))

    run_stage(stage_inputs, tmp_path / "sup", "--nli", nli_file(tmp_path / "nli.csv"))
    run_stage(stage_inputs, tmp_path / "unsup")
    key = next(k for k in before if k.endswith("pooler.dense.weight"))
    sup, unsup = pooler(tmp_path / "sup")[key], pooler(tmp_path / "unsup")[key]
    assert not torch.equal(sup, before[key]), \
        "minbert.methods.simcse.main (supervised, --nli): the exported pooler is the starting model's: the MLP was dropped, SimCSE App. A keeps it"
    assert torch.equal(unsup, before[key]), \
        "minbert.methods.simcse.main (unsupervised): the exported pooler changed; App. A drops the MLP for unsupervised SimCSE"
    run_stage(stage_inputs, tmp_path / "drop", "--nli", str(tmp_path / "nli.csv"), "--test_mlp", "drop")
    assert torch.equal(pooler(tmp_path / "drop")[key], before[key]), "minbert.methods.simcse.main --test_mlp drop must not export the MLP"


def test_weight_decay_and_dropout_flags(stage_inputs, tmp_path, monkeypatch):
    import json
    seen = {}
    real = simcse.AdamW.__init__

    def spy(self, params, **kw):
        params = list(params)
        seen["decay"] = sorted({g["weight_decay"] for g in params if isinstance(g, dict)})
        real(self, params, **kw)
    monkeypatch.setattr(simcse.AdamW, "__init__", spy)
    run_stage(stage_inputs, tmp_path / "wd", "--weight_decay", "0.03", "--attention_dropout", "0.0", "--hidden_dropout", "0.2")
    assert seen["decay"] == [0.0, 0.03], f"minbert.methods.simcse --weight_decay 0.03: expected groups decayed 0.03 and 0 (biases), got {seen}"
    exported = json.loads((tmp_path / "wd" / "model" / "config.json").read_text())
    original = json.loads((stage_inputs[1] / "config.json").read_text())
    assert exported["attention_probs_dropout_prob"] == original["attention_probs_dropout_prob"], \
        "minbert.methods.simcse --attention_dropout: SimCSE's dropout must not leak into the exported config"
    assert json.loads((tmp_path / "wd" / "metrics.json").read_text())["args"]["attention_dropout"] == 0.0


def test_cs224n_sentences_use_the_shipped_quora_sample(tmp_path):
    """--data cs224n on the repository's data/ (no full Quora files): the sample stands in, as in train_multitask.py."""
    from test_train_multitask import write_task_files
    write_task_files(tmp_path)
    for split in ("train", "dev"):
        (tmp_path / f"quora-{split}.csv").rename(tmp_path / f"quora-{split}-sample.csv")
    texts = simcse.read_sentences("cs224n", str(tmp_path))
    quora = [e.text for e in simcse.read_quora(str(tmp_path / "quora-train-sample.csv"))]
    assert set(quora) <= set(texts), "minbert.methods.simcse.read_sentences(cs224n): the Quora sample's sentences are missing"
