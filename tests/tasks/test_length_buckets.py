"""Length buckets (minbert/tasks/length_buckets.py): which length a batch is padded to, and that the padding is
masked, so a padded batch gives the unpadded batch's loss and gradients (each task's loss, both poolings).

The reference is the same batch without the extra padding: attention weighs masked keys 0, real tokens keep their
positions, and the pooled vector reads [CLS] or the mean over the real tokens, so nothing may change but rounding.
"""

import pytest
import torch

from conftest import make_batch, tiny_multitask
from minbert.tasks.length_buckets import BUCKETS, bucket_length, pad_to_bucket, use_on
from minbert.tasks.multitask import task_loss

PAD_ID = 0   # BERT's [PAD]; make_batch pads with 0 too


@pytest.mark.parametrize("longest, max_length, want", [
    (1, 128, 32), (12, 512, 32), (32, 128, 32),      # the smallest bucket that holds the batch
    (33, 128, 64), (65, 128, 128), (128, 128, 128),
    (20, 50, 32), (40, 50, 50), (50, 50, 50),        # --max_seq_len 50: 32, then 50 itself, never 64
    (300, 512, 512), (257, 300, 300),                # past the last bucket under max_length: max_length
])
def test_a_batch_is_padded_to_the_smallest_bucket_that_holds_it_never_past_max_length(longest, max_length, want):
    got = bucket_length(longest, max_length)
    assert got == want, (f"minbert.tasks.length_buckets.bucket_length({longest}, max_length={max_length}): expected "
                         f"{want} (the smallest of {BUCKETS} holding {longest} tokens, at most max_length), got {got}")


@pytest.mark.parametrize("longest", [0, 129])
def test_a_length_outside_one_to_max_length_is_refused(longest):
    with pytest.raises(ValueError, match="max_length=128"):
        bucket_length(longest, 128)


def test_padding_keeps_every_real_token_and_masks_the_rest():
    batch = make_batch("sst")
    padded = pad_to_bucket(batch, 128, PAD_ID)
    B, T = batch["input_ids"].shape
    for key, fill in (("input_ids", PAD_ID), ("attention_mask", 0), ("token_type_ids", 0)):
        assert padded[key].shape == (B, 32), f"pad_to_bucket: {key} must be (B, 32) for T={T}, got {padded[key].shape}"
        assert torch.equal(padded[key][:, :T], batch[key]), f"pad_to_bucket changed the first T columns of {key}"
        assert (padded[key][:, T:] == fill).all(), f"pad_to_bucket: {key}'s added columns must all be {fill}"
    assert padded["labels"] is batch["labels"], "pad_to_bucket must pass the other keys through"


def with_sentence_b(batch):
    """The batch with a second sentence, as 'separate' pairs (bi-encoder heads) have: example 1 padded after 5."""
    b = {f"{k}_b": v.flip(0)[:, :10].clone() for k, v in batch.items() if k != "labels"}
    b["input_ids_b"][1, 5:], b["attention_mask_b"][1, 5:] = PAD_ID, 0
    return {**batch, **b}


def close(actual, expected, where):
    """fp32 equality up to rounding: max |actual - expected| <= 1e-6 x max(1, max |expected|) (a gradient of size 5
    rounds at a few 1e-7); the message gives the sizes, not the tensors."""
    diff, scale = (actual - expected).abs().max().item(), max(1.0, expected.abs().max().item())
    assert diff <= 1e-6 * scale, f"{where}: max abs diff {diff:.3g} > 1e-6 x {scale:.3g}, shape {tuple(expected.shape)}"


def loss_and_grads(model, task, batch):
    model.zero_grad(set_to_none=True)
    loss = task_loss(task, model(task, batch), batch["labels"])
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


CASES = [("sst", "cross"), ("para", "cross"), ("sts", "cross"), ("para", "siamese"), ("sts", "cosine")]


@pytest.mark.parametrize("pooling", ["pooler", "mean"])
@pytest.mark.parametrize("task, pair_head", CASES)
def test_a_padded_batch_gives_the_unpadded_loss_and_gradients(task, pair_head, pooling):
    """SST cross-entropy, paraphrase BCE, STS regression; [CLS] (pooler) and mean pooling; cross-encoder and
    bi-encoder pairs (sentence b padded to its own bucket). Eval mode: dropout would draw masks of another shape."""
    torch.manual_seed(0)
    model = tiny_multitask(seed=1, pooling=pooling, pair_heads={task: pair_head} if task != "sst" else None).eval()
    batch = make_batch(task, seed=2)
    if pair_head not in ("cross",):
        batch = with_sentence_b(batch)
    padded = pad_to_bucket(batch, 512, PAD_ID)
    assert padded["input_ids"].shape[1] == 32 and padded.get("input_ids_b", torch.zeros(1, 32)).shape[1] == 32
    loss, grads = loss_and_grads(model, task, batch)
    padded_loss, padded_grads = loss_and_grads(model, task, padded)
    where = f"{task} loss, {pair_head} head, {pooling} pooling, T=12 padded to 32"
    close(padded_loss, loss, f"{where}: the loss (padding must be masked: attention mask 0, mean over real tokens)")
    assert padded_grads.keys() == grads.keys(), f"{where}: the parameters with a gradient differ"
    for name, grad in grads.items():
        close(padded_grads[name], grad, f"{where}: the gradient of {name}")


def test_use_on_pads_batches_on_cuda_only_and_a_split_without_it_pads_to_its_longest():
    from conftest import WordTokenizer, make_examples   # a tokenizer without the model files, padding with id 0
    from minbert.tasks.sampling import TaskData

    class Tokenizer(WordTokenizer):
        pad_id = PAD_ID

    data = TaskData(make_examples(6), Tokenizer(), max_length=40)
    longest = max(data.lengths)
    assert use_on(torch.device("cpu"), data) is False and data.buckets is False, "--compile on CPU must not bucket"
    assert [b["input_ids"].shape[1] for b in data.batches(6, shuffle=False)] == [longest], \
        "without buckets a batch is padded to its longest example, as before"
    assert use_on(torch.device("cuda"), data) is True and data.buckets is True, "--compile on CUDA must bucket"
    batch = next(data.batches(6, shuffle=False))
    assert batch["input_ids"].shape[1] == bucket_length(longest, 40), \
        f"TaskData with buckets: a batch of longest {longest} must be padded to {bucket_length(longest, 40)}"
    assert batch["attention_mask"].sum(1).tolist() == [data.lengths[i] for i in batch["index"].tolist()], \
        "TaskData with buckets: the mask must count exactly each example's real tokens"
