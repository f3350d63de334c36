"""BertConfig: every size and rate the model reads, with bert-base-uncased's values as defaults.

Field names are the ones Hugging Face `config.json` files use, so a checkpoint's config maps onto
this dataclass 1:1 (`BertConfig.from_json`). Keys we do not read (architectures, ...) are ignored;
settings that would change the maths in a way minbert does not implement (another activation,
relative positions) raise instead of being silently ignored. So does a `model_type` other than
"bert": a RoBERTa, DistilBERT or ELECTRA folder has other weight names, position offsets or
embedding sizes, and loading it as BERT would fail late or, worse, train quietly on the wrong
model. A config.json without `model_type` (some old BERT exports) is read as BERT.
"""

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from minbert.core.errors import UserError


class ConfigError(UserError, ValueError):
    """A config.json that is not valid JSON, or asks for maths minbert does not implement."""


@dataclass
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768                 # C: width of every token vector
    num_hidden_layers: int = 12            # L
    num_attention_heads: int = 12          # H; head dim D = C / H
    intermediate_size: int = 3072          # FFN width, 4C
    max_position_embeddings: int = 512     # longest sequence the position table covers
    type_vocab_size: int = 2               # segment A / segment B
    hidden_dropout_prob: float = 0.1       # embeddings and both residual branches
    attention_probs_dropout_prob: float = 0.1  # on the softmax probabilities
    layer_norm_eps: float = 1e-12
    initializer_range: float = 0.02        # std of the N(0, std) init of Linear/Embedding weights
    pad_token_id: int = 0
    fast_attention: bool = False           # True: F.scaled_dot_product_attention instead of the written-out softmax

    def __post_init__(self):
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"BertConfig: hidden_size {self.hidden_size} is not divisible by "
                             f"num_attention_heads {self.num_attention_heads}")

    @classmethod
    def tiny(cls, **overrides) -> "BertConfig":
        """A 2-layer, 32-wide model (2 heads, FFN 64, 128 positions) for tests and smoke runs (same
        vocab, so real tokenizers work)."""
        sizes = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=128)
        return cls(**{**sizes, **overrides})

    @classmethod
    def from_dict(cls, d: dict, source: str = "config") -> "BertConfig":
        # A checkpoint trained with another activation or position scheme would load without
        # error and give wrong outputs, so refuse it loudly.
        if not isinstance(d, dict):
            raise ConfigError(f"{source}: expected a JSON object of BERT settings, got {type(d).__name__}")
        if d.get("model_type", "bert") != "bert":
            raise ConfigError(f"{source}: model_type={d['model_type']!r}, but minbert implements BERT only "
                              "(model_type 'bert'); pass a BERT checkpoint, e.g. bert-base-uncased or minilm-l6")
        if d.get("hidden_act", "gelu") != "gelu":
            raise ConfigError(f"{source}: hidden_act={d['hidden_act']!r}; minbert implements only exact 'gelu'")
        if d.get("position_embedding_type", "absolute") != "absolute":
            raise ConfigError(f"{source}: position_embedding_type={d['position_embedding_type']!r}; "
                             "minbert implements only 'absolute'")
        values = {}
        for f in fields(cls):
            if f.name not in d:
                continue
            # JSON gives int, float, bool or str: "768" or 768.0 would build a model that fails
            # far from here (or, for a bool, silently as 0/1), so check each field's type now.
            v, kind = d[f.name], f.type                     # kind: int, float or bool
            if kind is bool:
                ok = isinstance(v, bool)
            else:
                ok = isinstance(v, int if kind is int else (int, float)) and not isinstance(v, bool)
            if not ok:
                what = {int: "an integer", float: "a number", bool: "true or false"}[kind]
                raise ConfigError(f"{source}: {f.name}={v!r}; expected {what}")
            values[f.name] = v
        try:
            return cls(**values)
        except ValueError as e:   # __post_init__: sizes that do not fit together
            raise ConfigError(f"{source}: {e}") from None

    @classmethod
    def from_json(cls, path) -> "BertConfig":
        path = Path(path)
        try:
            d = json.loads(path.read_text())
        except json.JSONDecodeError as e:
            raise ConfigError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
        return cls.from_dict(d, source=str(path))

    def to_hf_dict(self) -> dict:
        """The config.json a Hugging Face BertModel can read (used by BertModel.save_pretrained)."""
        d = asdict(self)
        d.pop("fast_attention")
        return {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu",
                "position_embedding_type": "absolute", **d}
