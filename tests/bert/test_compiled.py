"""minbert/bert/compiled.py: `--compile` gives eager's numbers and keeps checkpoints unchanged.

Oracle (b): the eager model itself (the same weights, dropout off), for the written-out and the
SDPA attention paths: the forward outputs, the loss, every gradient and the weights after one
AdamW step must agree within 1e-5 (fp32: inductor's fused kernels reassociate sums, so bitwise
equality is not expected; the observed differences are ~1e-7). AdamW's eps is 1e-6 here so a
gradient of ~1e-7 cannot flip a whole lr-sized step. Property: state_dict keys are unchanged
(no `_orig_mod.` prefix), and every block is compiled in place. The numbers build C++ kernels with the
system compiler on first use (cached afterwards in the inductor cache): minutes on a machine's first run on
2 cores, ~20-40 s warm, so that test is marked slow (left out of the README's quick command).
Run: python -m pytest -q tests/bert/test_compiled.py
"""

import pytest
import torch

from minbert.adamw import AdamW
from minbert.bert.compiled import compile_blocks
from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.tasks.multitask import MultitaskBert, task_loss

TOL = dict(atol=1e-5, rtol=1e-5)


def batch():
    g = torch.Generator().manual_seed(1)
    b = {"input_ids": torch.randint(1000, 3000, (4, 12), generator=g), "attention_mask": torch.ones(4, 12, dtype=torch.long),
         "token_type_ids": torch.zeros(4, 12, dtype=torch.long), "labels": torch.randint(0, 5, (4,), generator=g)}
    b["attention_mask"][0, 8:] = 0   # padding, so the mask path is exercised
    return b


def test_compile_blocks_compiles_every_block_in_place_and_keeps_state_dict_keys():
    """Property, without compiling a kernel (compilation is lazy, at the first call): every Embeddings, BertLayer
    and Pooler and each head is compiled in place, and the state_dict keys stay as they were."""
    from minbert.bert.layers import BertLayer, Embeddings, Pooler
    torch.manual_seed(0)
    model = MultitaskBert(BertModel(BertConfig.tiny()), dropout=0.0)
    keys, heads = list(model.state_dict()), list(model.heads.values())
    blocks = [m for m in model.modules() if isinstance(m, (Embeddings, BertLayer, Pooler))] + heads
    n = compile_blocks(model, heads)
    where = "minbert.bert.compiled.compile_blocks"
    assert n == len(blocks), f"{where}: returned {n}, expected {len(blocks)} (embeddings, each layer, pooler, heads)"
    missed = [type(m).__name__ for m in blocks if getattr(m, "_compiled_call_impl", None) is None]
    assert not missed, f"{where}: these blocks were not compiled in place (nn.Module.compile()): {missed}"
    assert list(model.state_dict()) == keys, f"{where}: state_dict keys changed (expected no _orig_mod. prefix)"


@pytest.mark.slow   # inductor builds C++ kernels: ~20-40 s warm, minutes on a machine's first run
@pytest.mark.parametrize("fast_attention", [False, True], ids=["explicit", "sdpa"])
def test_compiled_forward_and_train_step_equal_eager(fast_attention):
    torch.manual_seed(0)
    cfg = BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, fast_attention=fast_attention)
    eager = MultitaskBert(BertModel(cfg), dropout=0.0)
    compiled = MultitaskBert(BertModel(cfg), dropout=0.0)
    compiled.load_state_dict(eager.state_dict())
    keys = list(compiled.state_dict())
    compile_blocks(compiled, list(compiled.heads.values()))
    where = f"minbert.bert.compiled.compile_blocks ({'sdpa' if fast_attention else 'explicit'} attention)"
    assert list(compiled.state_dict()) == keys, f"{where}: state_dict keys changed (expected no _orig_mod. prefix)"
    b = batch()
    outs, params = [], []
    for model in (eager, compiled):
        opt = AdamW(model.parameters(), lr=1e-4, eps=1e-6)
        out = model("sst", b)                                         # (B, 5) logits
        task_loss("sst", out, b["labels"]).backward()
        grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
        opt.step()
        outs.append((out.detach(), grads))
        params.append({n: p.detach().clone() for n, p in model.named_parameters()})
    torch.testing.assert_close(outs[1][0], outs[0][0], **TOL, msg=lambda m: f"{where}: forward differs from eager: {m}")
    assert outs[1][1].keys() == outs[0][1].keys(), f"{where}: a different set of params got gradients"
    for n in outs[0][1]:
        torch.testing.assert_close(outs[1][1][n], outs[0][1][n], **TOL, msg=lambda m: f"{where}: grad of {n} differs: {m}")
    for n in params[0]:
        torch.testing.assert_close(params[1][n], params[0][n], **TOL, msg=lambda m: f"{where}: {n} after AdamW differs: {m}")


@pytest.mark.gpu   # CUDA graphs exist only on CUDA: skipped, with the reason, where no GPU is visible
def test_cuda_graphs_train_steps_on_length_buckets_equal_eager_on_the_gpu():
    """mode="reduce-overhead" (CUDA graphs) over batches padded to length buckets: three train steps, each on a
    batch of another length, give eager's losses and weights on the same GPU (fp32, TF32 off)."""
    from minbert.tasks.length_buckets import pad_to_bucket
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    cfg = BertConfig.tiny(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, fast_attention=True)
    eager = MultitaskBert(BertModel(cfg), dropout=0.0).cuda()
    graphs = MultitaskBert(BertModel(cfg), dropout=0.0).cuda()
    graphs.load_state_dict(eager.state_dict())
    compile_blocks(graphs, list(graphs.heads.values()), mode="reduce-overhead")
    batches = []
    for T in (12, 20, 40):   # buckets 32, 32, 64: one shape replayed, one new
        b = batch()
        b = {k: v.repeat(1, -(-T // 12))[:, :T] if v.dim() == 2 else v for k, v in b.items()}
        batches.append({k: v.cuda() for k, v in pad_to_bucket(b, 512, 0).items()})
    losses = []
    for model in (eager, graphs):
        opt, seen = AdamW(model.parameters(), lr=1e-4, eps=1e-6), []
        for b in batches:
            torch.compiler.cudagraph_mark_step_begin()
            loss = task_loss("sst", model("sst", b), b["labels"])
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            seen.append(loss.item())
        losses.append(seen)
    where = "minbert.bert.compiled.compile_blocks(mode='reduce-overhead') on CUDA, bucketed batches"
    torch.testing.assert_close(torch.tensor(losses[1]), torch.tensor(losses[0]), **TOL,
                               msg=lambda m: f"{where}: the losses of 3 steps differ from eager: {m}")
    for (n, p), q in zip(eager.named_parameters(), graphs.parameters()):
        torch.testing.assert_close(q, p, **TOL, msg=lambda m: f"{where}: {n} after 3 steps differs from eager: {m}")
