"""Grades `python -m minbert simcse` (minbert/tools/simcse_stage.py): its readers, its flags, what it exports.

The method itself (Eq. 4/5, the training-time MLP) is graded by tests/methods/test_simcse.py. Oracles: (c)
properties: τ reaches the loss (two τ, one seed, two losses); supervised SimCSE exports its MLP as the pooler and
unsupervised does not (SimCSE App. A); the decay groups and the exported config; the readers' rows and errors.
"""

import pytest
import torch

from minbert.tools import simcse_stage


def test_read_nli_requires_simcse_columns(tmp_path):
    good = tmp_path / "nli.csv"
    good.write_text("sent0,sent1,hard_neg\nA man sings.,Someone sings.,Nobody sings.\n")
    assert simcse_stage.read_nli(str(good)) == [("A man sings.", "Someone sings.", "Nobody sings.")]
    bad = tmp_path / "bad.csv"
    bad.write_text("premise,hypothesis\nx,y\n")
    with pytest.raises(simcse_stage.UserError, match="sent0, sent1, hard_neg"):
        simcse_stage.read_nli(str(bad))


@pytest.fixture(scope="module")
def stage_inputs(tmp_path_factory):
    """CS224N-format files and a tiny model folder (MiniLM's vocabulary), as test_train_multitask's."""
    from conftest import tiny_run_inputs
    return tiny_run_inputs(tmp_path_factory.mktemp("simcse"))


def run_stage(stage_inputs, out, *extra):
    data, model = stage_inputs
    return simcse_stage.main(["--model", str(model), "--data_dir", str(data), "--limit", "8", "--batch_size", "4",
                        "--max_steps", "1", "--device", "cpu", "--amp", "off", "--seed", "5", "--out_dir", str(out), *extra])


def test_temperature_flag_reaches_the_loss(stage_inputs, tmp_path):
    """python -m minbert simcse --temperature τ: the same seed (same batch, same dropout masks) with
    τ 0.1 and τ 0.05 must give different first-step losses; the old code parsed τ and used 0.05."""
    a = run_stage(stage_inputs, tmp_path / "t05", "--temperature", "0.05")["final_loss"]
    b = run_stage(stage_inputs, tmp_path / "t10", "--temperature", "0.1")["final_loss"]
    again = run_stage(stage_inputs, tmp_path / "t05b", "--temperature", "0.05")["final_loss"]
    assert a == pytest.approx(again, abs=1e-6), f"minbert.tools.simcse_stage.main: the same seed and τ must repeat the loss, got {a} and {again}"
    assert abs(a - b) > 1e-4, f"minbert.tools.simcse_stage.main: --temperature 0.1 and 0.05 gave the same loss {a}: τ never reaches the loss"


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
        "minbert.tools.simcse_stage.main (supervised, --nli): the exported pooler is the starting model's: the MLP was dropped, SimCSE App. A keeps it"
    assert torch.equal(unsup, before[key]), \
        "minbert.tools.simcse_stage.main (unsupervised): the exported pooler changed; App. A drops the MLP for unsupervised SimCSE"
    run_stage(stage_inputs, tmp_path / "drop", "--nli", str(tmp_path / "nli.csv"), "--test_mlp", "drop")
    assert torch.equal(pooler(tmp_path / "drop")[key], before[key]), "minbert.tools.simcse_stage.main --test_mlp drop must not export the MLP"


def test_weight_decay_and_dropout_flags(stage_inputs, tmp_path, monkeypatch):
    import json
    seen = {}
    real = simcse_stage.AdamW.__init__

    def spy(self, params, **kw):
        params = list(params)
        seen["decay"] = sorted({g["weight_decay"] for g in params if isinstance(g, dict)})
        real(self, params, **kw)
    monkeypatch.setattr(simcse_stage.AdamW, "__init__", spy)
    run_stage(stage_inputs, tmp_path / "wd", "--weight_decay", "0.03", "--attention_dropout", "0.0", "--hidden_dropout", "0.2")
    assert seen["decay"] == [0.0, 0.03], f"minbert.tools.simcse_stage --weight_decay 0.03: expected groups decayed 0.03 and 0 (biases), got {seen}"
    exported = json.loads((tmp_path / "wd" / "model" / "config.json").read_text())
    original = json.loads((stage_inputs[1] / "config.json").read_text())
    assert exported["attention_probs_dropout_prob"] == original["attention_probs_dropout_prob"], \
        "minbert.tools.simcse_stage --attention_dropout: SimCSE's dropout must not leak into the exported config"
    assert json.loads((tmp_path / "wd" / "metrics.json").read_text())["args"]["attention_dropout"] == 0.0


def test_cs224n_sentences_use_the_shipped_quora_sample(tmp_path):
    """--data cs224n on the repository's data/ (no full Quora files): the sample stands in, as in train_multitask.py."""
    from conftest import write_task_files
    write_task_files(tmp_path)
    for split in ("train", "dev"):
        (tmp_path / f"quora-{split}.csv").rename(tmp_path / f"quora-{split}-sample.csv")
    texts = simcse_stage.read_sentences("cs224n", str(tmp_path))
    quora = [e.text for e in simcse_stage.read_quora(str(tmp_path / "quora-train-sample.csv"))]
    assert set(quora) <= set(texts), "minbert.tools.simcse_stage.read_sentences(cs224n): the Quora sample's sentences are missing"


def test_a_second_stage_into_the_same_folder_is_refused_unless_overwrite(stage_inputs, tmp_path):
    """`python -m minbert simcse --out_dir X` replaced X/model/ (another stage's encoder, or a run's model) silently."""
    run_stage(stage_inputs, tmp_path / "out")
    before = {p.name: p.read_bytes() for p in (tmp_path / "out" / "model").iterdir()}
    with pytest.raises(simcse_stage.UserError, match="already exists.*--overwrite"):
        run_stage(stage_inputs, tmp_path / "out", "--seed", "6")
    after = {p.name: p.read_bytes() for p in (tmp_path / "out" / "model").iterdir()}
    assert after == before, "minbert.tools.simcse_stage.main: a refused stage changed the model folder there"
    run_stage(stage_inputs, tmp_path / "out", "--seed", "6", "--overwrite")
