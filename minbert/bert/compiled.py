"""`--compile`: torch.compile the encoder and the heads, in place, so checkpoints never change.

torch.compile (PyTorch 2, "TorchDynamo + TorchInductor") traces a module's forward into a graph
and generates fused kernels for it: C++/OpenMP built with the system compiler on CPU, Triton on
CUDA. The first steps pay the compile (tens of seconds per distinct shape, once), later steps
run the fused code; the maths is the same up to floating-point reassociation.

Variant chosen:
- In place, with `nn.Module.compile()`, per block: every BertLayer, the embeddings, the pooler
  and each head. `torch.compile(model)` would return an `OptimizedModule` whose state_dict keys
  gain an `_orig_mod.` prefix (nanoGPT #325); compiling in place keeps the model object, its
  parameters and its state_dict keys exactly as they are, so checkpoints load with or without
  --compile. Per block, not the whole model, because the scripts call the encoder's methods
  (`embed`, `encode`, PALs' `layer_extra`), which only a module's __call__ would route through
  a compiled forward. The layers share one code object, so they share one compiled graph.
- Both attention paths compile: the written-out softmax(QKᵀ/√D + mask)V and
  F.scaled_dot_product_attention (BertConfig.fast_attention).
- Batches of varying T (length-aware batching) trigger one recompile, after which torch marks T
  as dynamic and stops recompiling. On CUDA the training scripts pad batches to a few lengths instead
  (minbert/tasks/length_buckets.py): the static shapes that CUDA graphs need.
- `mode` is torch.compile's: None (the default: fused kernels, launched one by one from Python) or
  "reduce-overhead" (CUDA graphs: a step's kernels recorded once per shape and replayed with one launch).
  The scripts use the default; bench/gpu_check.py measures both on a GPU, eager and Hugging Face beside them.
Left out: `fullgraph=True` (our CPU dropout is an autograd.Function and MML heads mask with a buffer;
both compile, with graph breaks allowed).
"""

from torch import nn

from minbert.bert.layers import BertLayer, Embeddings, Pooler


def compile_blocks(model: nn.Module, heads: list[nn.Module], mode: str | None = None) -> int:
    """Compile in place every BERT block inside `model` and each module of `heads` (torch.compile's `mode`).
    Returns the number of modules compiled (a model with no BERT block is a caller's mistake)."""
    blocks = [m for m in model.modules() if isinstance(m, (Embeddings, BertLayer, Pooler))]
    if not blocks:
        raise ValueError("minbert.bert.compiled.compile_blocks: found no BertLayer/Embeddings/Pooler in the model")
    for m in blocks + list(heads):
        m.compile(mode=mode)
    return len(blocks) + len(heads)
