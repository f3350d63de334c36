"""minbert/bert/config.py: BertConfig's defaults, tiny(), config.json in and out, and the refusals.

Oracles: (a) bert-base-uncased's published config.json (huggingface.co/bert-base-uncased, written
out below); (b) live — transformers.BertConfig, whose defaults are also bert-base-uncased's and which
must read our config.json; (c) properties — a round trip through config.json is exact, and every
malformed or foreign config.json stops with a message naming the file and the key, before any
weight is read.
Run: python -m pytest -q tests/bert/test_config.py   (offline, CPU, a few seconds)
"""

import json
from dataclasses import asdict, fields

import pytest

from minbert.bert import model as model_module
from minbert.bert.config import BertConfig, ConfigError
from minbert.bert.model import BertModel
from minbert.core.errors import UserError, cli
from conftest import save_tiny_model

# https://huggingface.co/bert-base-uncased/blob/main/config.json, as published
BERT_BASE_UNCASED = {
    "architectures": ["BertForMaskedLM"], "attention_probs_dropout_prob": 0.1, "gradient_checkpointing": False,
    "hidden_act": "gelu", "hidden_dropout_prob": 0.1, "hidden_size": 768, "initializer_range": 0.02,
    "intermediate_size": 3072, "layer_norm_eps": 1e-12, "max_position_embeddings": 512, "model_type": "bert",
    "num_attention_heads": 12, "num_hidden_layers": 12, "pad_token_id": 0, "position_embedding_type": "absolute",
    "transformers_version": "4.6.0.dev0", "type_vocab_size": 2, "use_cache": True, "vocab_size": 30522,
}
FIELDS = [f.name for f in fields(BertConfig) if f.name != "fast_attention"]   # fast_attention is ours, not HF's


def test_defaults_are_bert_base_uncased():
    ours = asdict(BertConfig())
    wrong = {k: (ours[k], BERT_BASE_UNCASED[k]) for k in FIELDS if ours[k] != BERT_BASE_UNCASED[k]}
    assert not wrong, \
        f"minbert.bert.config.BertConfig: defaults differ from bert-base-uncased's config.json (ours, theirs): {wrong}"
    assert ours["fast_attention"] is False, "BertConfig.fast_attention must default to the written-out attention"
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertConfig()
    wrong = {k: (ours[k], getattr(hf, k)) for k in FIELDS if ours[k] != getattr(hf, k)}
    assert not wrong, \
        f"minbert.bert.config.BertConfig: defaults differ from transformers.BertConfig() (ours, theirs): {wrong}"


def test_bert_base_uncased_config_json_reads_to_the_defaults(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(BERT_BASE_UNCASED, indent=2))
    assert BertConfig.from_json(tmp_path / "config.json") == BertConfig(), \
        "minbert.bert.config.BertConfig.from_json: bert-base-uncased's config.json must give BertConfig()'s defaults"


def test_tiny_is_two_layers_32_wide_with_the_same_vocabulary_and_takes_overrides():
    t = BertConfig.tiny()
    got = (t.num_hidden_layers, t.hidden_size, t.num_attention_heads, t.intermediate_size)
    assert got == (2, 32, 2, 64), f"minbert.bert.config.BertConfig.tiny: (L, C, H, F) = {got}, expected (2, 32, 2, 64)"
    # the seeded tiny model is pinned (tests compare runs on it byte for byte), and the position table's size
    # decides how much of the seeded init it takes, so every weight drawn after it: exactly 128, as documented
    assert t.max_position_embeddings == 128, \
        f"minbert.bert.config.BertConfig.tiny: max_position_embeddings {t.max_position_embeddings}, documented 128"
    assert t.vocab_size == BertConfig().vocab_size, "BertConfig.tiny must keep BERT's vocabulary (real tokenizers)"
    o = BertConfig.tiny(hidden_dropout_prob=0.0, num_hidden_layers=3, fast_attention=True)
    assert (o.hidden_dropout_prob, o.num_hidden_layers, o.fast_attention, o.hidden_size) == (0.0, 3, True, 32), \
        "BertConfig.tiny(**overrides): overrides must replace the tiny sizes and keep the others"


def test_config_json_round_trip_is_exact_and_transformers_reads_it(tmp_path):
    cfg = BertConfig.tiny(hidden_dropout_prob=0.3, layer_norm_eps=1e-7, type_vocab_size=3)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg.to_hf_dict()))
    back = BertConfig.from_json(path)
    assert back == BertConfig(**{**asdict(cfg), "fast_attention": False}), \
        f"BertConfig.to_hf_dict -> from_json: {back} differs from {cfg} (fast_attention is not saved)"
    d = json.loads(path.read_text())
    assert d["model_type"] == "bert" and d["hidden_act"] == "gelu" and "fast_attention" not in d, \
        f"BertConfig.to_hf_dict: must state model_type 'bert' and hidden_act 'gelu', not fast_attention; got {d}"
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertConfig.from_json_file(str(path))
    wrong = {k: (getattr(cfg, k), getattr(hf, k)) for k in FIELDS if getattr(cfg, k) != getattr(hf, k)}
    assert not wrong, f"transformers.BertConfig read our config.json differently (ours, theirs): {wrong}"


@pytest.mark.parametrize("text, expected", [
    ('{"hidden_size": 32,\n "num_attention_heads": 2,,\n}', ["config.json:2:", "not valid JSON"]),
    ('[1, 2]', ["config.json", "expected a JSON object", "got list"]),
    ('{"model_type": "roberta"}', ["config.json", "model_type='roberta'", "BERT only", "bert-base-uncased or minilm-l6"]),
    ('{"model_type": "distilbert", "dim": 768}', ["config.json", "model_type='distilbert'"]),
    ('{"hidden_act": "relu"}', ["config.json", "hidden_act='relu'"]),
    ('{"position_embedding_type": "relative_key"}', ["config.json", "position_embedding_type='relative_key'",
                                                     "only 'absolute'"]),
    ('{"hidden_size": "768"}', ["config.json", "hidden_size='768'", "expected an integer"]),
    ('{"num_hidden_layers": 12.0}', ["config.json", "num_hidden_layers=12.0", "expected an integer"]),
    ('{"hidden_dropout_prob": true}', ["config.json", "hidden_dropout_prob=True", "expected a number"]),
    ('{"fast_attention": 1}', ["config.json", "fast_attention=1", "expected true or false"]),
    ('{"hidden_size": 100, "num_attention_heads": 12}', ["config.json", "not divisible"]),
], ids=["bad-json", "not-an-object", "roberta", "distilbert", "relu", "relative-positions", "string-size",
        "float-layers", "bool-rate", "int-flag", "indivisible-heads"])
def test_malformed_config_json_is_refused_with_file_and_key(tmp_path, text, expected):
    path = tmp_path / "config.json"
    path.write_text(text)
    with pytest.raises(ConfigError) as e:
        BertConfig.from_json(path)
    assert isinstance(e.value, UserError), "ConfigError must be a UserError (one line, no traceback, in the scripts)"
    for want in expected:
        assert want in str(e.value), \
            f"minbert.bert.config.BertConfig.from_json({text!r}): message {str(e.value)!r} lacks {want!r}"


def test_config_json_without_model_type_is_read_as_bert(tmp_path):
    """Old BERT exports have no model_type: they must still load (only another model_type is refused)."""
    d = BertConfig.tiny().to_hf_dict()
    d.pop("model_type")
    (tmp_path / "config.json").write_text(json.dumps(d))
    assert BertConfig.from_json(tmp_path / "config.json").hidden_size == 32


def test_model_folder_of_another_model_type_is_refused_before_its_weights_are_read(tmp_path, monkeypatch):
    """A RoBERTa-labelled folder with BERT-shaped weights used to load and train as BERT, silently."""
    folder = save_tiny_model(tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    roberta = {**config, "model_type": "roberta", "architectures": ["RobertaModel"]}
    (folder / "config.json").write_text(json.dumps(roberta))
    read = []
    real = model_module.read_state_dict
    monkeypatch.setattr(model_module, "read_state_dict", lambda path: read.append(path) or real(path))
    with pytest.raises(ConfigError, match="model_type='roberta'") as e:
        BertModel.from_pretrained(folder)
    assert str(folder / "config.json") in str(e.value), f"the message must name the file: {e.value}"
    assert not read, f"minbert.bert.model.BertModel.from_pretrained read the weights {read} of a non-BERT folder"


def test_train_multitask_refuses_a_non_bert_model_with_one_line(tmp_path, capsys):
    import train_multitask
    folder = save_tiny_model(tmp_path / "model")
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**config, "model_type": "electra"}))
    (tmp_path / "data").mkdir()
    from conftest import write_task_files
    write_task_files(tmp_path / "data")
    argv = ["--model", str(folder), "--data_dir", str(tmp_path / "data"), "--out_dir", str(tmp_path / "run"),
            "--epochs", "1", "--batch_size", "4", "--amp", "off"]
    with pytest.raises(SystemExit) as e:
        cli(train_multitask.main, argv)
    text = capsys.readouterr().err
    assert e.value.code == 2 and "model_type='electra'" in text and "Traceback" not in text, \
        f"train_multitask --model <an ELECTRA folder>: expected exit 2 and one line naming model_type, " \
        f"got {e.value.code}:\n{text}"
    assert not (tmp_path / "run" / "last.pt").exists(), "train_multitask trained a non-BERT model"


def test_a_bool_field_reads_from_json_true_and_false():
    """fast_attention is the one bool field: JSON true/false must read as True/False (1 is refused above)."""
    for value in (True, False):
        got = BertConfig.from_dict({"fast_attention": value}).fast_attention
        assert got is value, f"minbert.bert.config.BertConfig.from_dict({{'fast_attention': {value}}}): got {got!r}"


def test_to_hf_dict_uses_the_keys_and_values_hugging_face_writes(tmp_path):
    """Oracle (a), the published bert-base-uncased config.json: every key we write is one of its keys, and
    model_type, hidden_act and position_embedding_type are there with its values. Oracle (b), live: the
    architectures entry is what transformers' BertModel.save_pretrained writes."""
    ours = BertConfig().to_hf_dict()
    foreign = sorted(set(ours) - set(BERT_BASE_UNCASED))
    assert not foreign, f"minbert.bert.config.BertConfig.to_hf_dict: keys {foreign} are not in a BERT config.json"
    for key in ("model_type", "hidden_act", "position_embedding_type"):
        assert ours.get(key) == BERT_BASE_UNCASED[key], \
            f"minbert.bert.config.BertConfig.to_hf_dict: {key}={ours.get(key)!r}, bert-base-uncased has {BERT_BASE_UNCASED[key]!r}"
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertConfig(**{k: v for k, v in asdict(BertConfig.tiny()).items() if k in FIELDS})
    transformers.BertModel(hf).save_pretrained(tmp_path)
    theirs = json.loads((tmp_path / "config.json").read_text())
    assert ours["architectures"] == theirs["architectures"], \
        (f"minbert.bert.config.BertConfig.to_hf_dict: architectures {ours['architectures']}, "
         f"transformers' BertModel.save_pretrained writes {theirs['architectures']}")
