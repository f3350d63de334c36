"""BertModel: the encoder stack, and loading/saving public BERT checkpoints.

Devlin et al. 2019, "BERT", arXiv:1810.04805. The model follows the CS224N minBERT handout's
interface: `model(input_ids, attention_mask, token_type_ids)` returns a dict with
`last_hidden_state` (B, T, C) and `pooler_output` (B, C).

Checkpoints: `BertModel.from_pretrained(name_or_path)` takes a local directory or weights file,
a hub name (`bert-base-uncased`, reusing the Hugging Face cache or downloading; see hub.py) or
the offline alias `minilm-l6`. `save_pretrained(directory)` writes a COMPLETE folder: config.json,
model.safetensors in Hugging Face naming, and the tokenizer files (vocab.txt,
tokenizer_config.json) of the checkpoint the model was loaded from, or of the `tokenizer` passed
in, so the folder loads through `BertModel.from_pretrained`, `Tokenizer.from_pretrained` and
`--model` of both scripts. Parameter names are mapped to checkpoint names through ONE
explicit table (`checkpoint_names`), nanoGPT-style; every other key is an error, except:
  - a `bert.` prefix and the original release's `LayerNorm.gamma/beta` names are accepted;
  - pre-training heads (`cls.*`) and the `embeddings.position_ids` buffer are ignored;
  - a missing pooler (e.g. MiniLM) is initialised N(0, 0.02) and reported once.
`from_pretrained` returns the model in TRAIN mode, like any freshly built nn.Module (the
handout and HF return eval mode, which silently turns dropout off in many fine-tuning
scripts). Call `.eval()` before evaluating.

Deliberately left out: the MLM/NSP pre-training heads, gradient checkpointing, head pruning,
returning all hidden states or attention maps.
"""

import json
import warnings
from dataclasses import replace
from pathlib import Path

import torch
from torch import nn

from minbert.core import hub
from minbert.bert.attention import extended_attention_mask
from minbert.bert.config import BertConfig
from minbert.bert.layers import BertLayer, Embeddings, Pooler
from minbert.bert.tokenizer import Tokenizer
from minbert.core.atomic import atomic_write
from minbert.core.errors import UserError


class CheckpointError(UserError, ValueError):
    """A checkpoint whose keys or shapes do not fit the model."""


class BertModel(nn.Module):
    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.embeddings = Embeddings(config)
        self.layers = nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))
        self.pooler = Pooler(config)
        self.apply(self._init_weights)

    def _init_weights(self, module: nn.Module):
        # BERT's init: weights ~ N(0, 0.02), biases 0, LayerNorm γ=1 β=0 (nn.LayerNorm's default).
        # On the meta device (from_pretrained) these calls cost nothing and are overwritten.
        std = self.config.initializer_range
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=std)
        if isinstance(module, nn.Linear):
            nn.init.zeros_(module.bias)
        if isinstance(module, nn.Embedding) and module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()

    def embed(self, input_ids, token_type_ids=None, word_embeds=None) -> torch.Tensor:
        """(B, T) ids -> (B, T, C) embedding-layer output (SMART perturbs this)."""
        return self.embeddings(input_ids, token_type_ids, word_embeds)

    def encode(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None,
               layer_extra=None) -> dict:
        """Run the layer stack and pooler on an embedding output x: (B, T, C).

        `layer_extra(i, h, mask)`, when given, is called with layer i's input h (B, T, C) and
        returns a (B, T, C) term added before that layer's second LayerNorm, or None
        (PALs: `layer_extra=lambda i, h, m: pals(task, i, h, m)`)."""
        # Hint: build the additive (B, 1, 1, T) mask once, in x's dtype (attention.extended_attention_mask; all
        # ones when attention_mask is None), run every layer in order (passing layer_extra's term
        # as `extra`), and return both outputs; the pooler reads the last hidden state.
        ### BEGIN SOLUTION layer
        if attention_mask is None:
            attention_mask = torch.ones(x.shape[:2], dtype=torch.long, device=x.device)
        mask = extended_attention_mask(attention_mask, x.dtype)           # (B, 1, 1, T)
        for i, layer in enumerate(self.layers):
            extra = None if layer_extra is None else layer_extra(i, x, mask)  # (B, T, C) or None
            x = layer(x, mask, extra)                                     # (B, T, C)
        return {"last_hidden_state": x, "pooler_output": self.pooler(x)}  # (B, T, C), (B, C)
        ### END SOLUTION

    def forward(self, input_ids, attention_mask=None, token_type_ids=None) -> dict:
        return self.encode(self.embed(input_ids, token_type_ids), attention_mask)

    # ------------------------------------------------------------------ checkpoints

    @classmethod
    def from_pretrained(cls, name_or_path, **config_overrides) -> "BertModel":
        """Load a HF-format BERT checkpoint. `config_overrides` replace config fields, e.g.
        `fast_attention=True` or `hidden_dropout_prob=0.3`. Returns the model in train mode."""
        path = hub.resolve(name_or_path)
        directory = path if path.is_dir() else path.parent
        config = replace(BertConfig.from_json(directory / "config.json"), **config_overrides)
        weights = hub.weights_file(path)
        # Build on the meta device (no memory, no init) and adopt the checkpoint's tensors:
        # ~7x faster than initialising 110M random numbers only to overwrite them.
        with torch.device("meta"):
            model = cls(config)
        state = from_checkpoint_names(read_state_dict(weights), model, source=str(weights))
        model.load_state_dict(state, assign=True)
        model.source = directory   # where save_pretrained finds the tokenizer files
        return model.train()

    def save_pretrained(self, directory, tokenizer=None) -> None:
        """Write config.json + model.safetensors in Hugging Face naming (HF BertModel can load it)
        and the tokenizer files: `tokenizer`'s, else those of the checkpoint this model was loaded
        from. A model built from a bare config with no tokenizer gets a warning: its folder has no
        vocabulary, so it cannot be passed to --model until a vocab.txt is added."""
        from safetensors.torch import save_file
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        names = checkpoint_names(self.config)
        state = {names[k]: v.detach().contiguous() for k, v in self.state_dict().items()}
        atomic_write(directory / "model.safetensors", lambda p: save_file(state, p, metadata={"format": "pt"}))
        text = json.dumps(self.config.to_hf_dict(), indent=2)
        atomic_write(directory / "config.json", lambda p: Path(p).write_text(text))
        source = getattr(self, "source", None)
        if tokenizer is None and source is not None and (source / "vocab.txt").is_file():
            tokenizer = Tokenizer.from_pretrained(source)
        if tokenizer is not None:
            tokenizer.save_pretrained(directory)
        else:
            warnings.warn(f"BertModel.save_pretrained: {directory} gets no vocab.txt (the model was "
                          "not loaded from a checkpoint with one); pass tokenizer= to make it complete",
                          stacklevel=2)


# ---------------------------------------------------------------------- the name table

# Our module path -> the Hugging Face module path, per layer. Every entry has .weight and .bias.
LAYER_NAMES = {
    "self_attention.query": "attention.self.query",
    "self_attention.key": "attention.self.key",
    "self_attention.value": "attention.self.value",
    "attention_dense": "attention.output.dense",
    "attention_layer_norm": "attention.output.LayerNorm",
    "interm_dense": "intermediate.dense",
    "out_dense": "output.dense",
    "out_layer_norm": "output.LayerNorm",
}
MODEL_NAMES = {
    "embeddings.word_embedding.weight": "embeddings.word_embeddings.weight",
    "embeddings.pos_embedding.weight": "embeddings.position_embeddings.weight",
    "embeddings.tk_type_embedding.weight": "embeddings.token_type_embeddings.weight",
    "embeddings.layer_norm.weight": "embeddings.LayerNorm.weight",
    "embeddings.layer_norm.bias": "embeddings.LayerNorm.bias",
    "pooler.dense.weight": "pooler.dense.weight",
    "pooler.dense.bias": "pooler.dense.bias",
}
POOLER = ("pooler.dense.weight", "pooler.dense.bias")
IGNORED_PREFIXES = ("cls.", "embeddings.position_ids")


def checkpoint_names(config: BertConfig) -> dict[str, str]:
    """{our parameter name: checkpoint name} for every parameter of BertModel(config)."""
    names = dict(MODEL_NAMES)
    for i in range(config.num_hidden_layers):
        for ours, theirs in LAYER_NAMES.items():
            for p in ("weight", "bias"):
                names[f"layers.{i}.{ours}.{p}"] = f"encoder.layer.{i}.{theirs}.{p}"
    return names


def normalise_key(key: str) -> str:
    """Accept both key styles: `bert.` prefix or not; LayerNorm `gamma/beta` or `weight/bias`."""
    key = key.removeprefix("bert.")
    return key.replace("LayerNorm.gamma", "LayerNorm.weight").replace("LayerNorm.beta", "LayerNorm.bias")


def read_state_dict(path: Path) -> dict[str, torch.Tensor]:
    try:
        if path.suffix == ".safetensors":
            from safetensors.torch import load_file
            return load_file(str(path))
        # weights_only: a .bin is a pickle; never execute code from a downloaded file.
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:   # truncated download, HTML error page saved as weights, foreign pickle, ...
        raise CheckpointError(f"{path}: cannot read the weights ({type(e).__name__}: {str(e)[:200]}); the file is "
                              f"truncated or not a checkpoint. Delete it and download again.") from None


def from_checkpoint_names(state: dict, model: BertModel, source: str) -> dict[str, torch.Tensor]:
    """Rename a checkpoint's tensors to our names; raise CheckpointError listing every problem."""
    theirs = {normalise_key(k): v for k, v in state.items()}
    theirs = {k: v for k, v in theirs.items() if not k.startswith(IGNORED_PREFIXES)}
    expected = {k: v.shape for k, v in model.state_dict().items()}
    out, missing, bad_shape = {}, [], []
    for ours, name in checkpoint_names(model.config).items():
        if name not in theirs:
            missing.append(name)
            continue
        t = theirs.pop(name)
        if t.shape != expected[ours]:
            bad_shape.append(f"{name}: checkpoint {tuple(t.shape)}, model {tuple(expected[ours])}")
        out[ours] = t.float() if t.is_floating_point() else t
    missing_pooler = [k for k in missing if k in POOLER]
    missing = [k for k in missing if k not in POOLER]
    unexpected = sorted(theirs)
    if missing or unexpected or bad_shape:
        lines = [f"{source} does not fit BertModel({model.config.num_hidden_layers} layers, "
                 f"hidden {model.config.hidden_size}):"]
        lines += [f"  missing: {k}" for k in missing]
        lines += [f"  unexpected: {k}" for k in unexpected]
        lines += [f"  shape mismatch: {s}" for s in bad_shape]
        raise CheckpointError("\n".join(lines))
    if missing_pooler:
        C, std = model.config.hidden_size, model.config.initializer_range
        out["pooler.dense.weight"] = torch.empty(C, C).normal_(0.0, std)
        out["pooler.dense.bias"] = torch.zeros(C)
        warnings.warn(f"{source} has no pooler weights: pooler initialised N(0, {std}). "
                      "Fine when fine-tuning; with a frozen encoder prefer the [CLS] hidden state.",
                      stacklevel=3)
    return out
