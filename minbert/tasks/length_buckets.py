"""Sequence-length buckets: each batch padded to one of a few lengths, so a compiled step sees few static shapes.

Length-aware batching (minbert.tasks.sampling.TaskData.batches) pads every batch only to its longest example, so a run
feeds the model dozens of different lengths T. Eager PyTorch does not care. A CUDA graph does: it replays kernels
recorded for one shape, so every new T means a new recording (torch.compile mode="reduce-overhead"), and the
compiled code for a new T is compiled again. Padded up to the next of BUCKETS, a run shows the model at most five
lengths, and a train step can be recorded once per length and replayed after that.

The padding changes nothing the model computes for the real tokens: it is masked (attention_mask 0), as any
batch's padding already is. Attention adds a large negative number to the masked keys' scores, so after the softmax
they weigh exactly 0; positions count from the left and padding goes on the right, so every real token keeps its
position; the pooled vector is the [CLS] token's or the mean over attention_mask 1. The losses and the gradients
are those of the unpadded batch (tests/tasks/test_length_buckets.py: each task's loss, both poolings, to 1e-6 in
fp32). What it costs is the padded tokens' compute: under twice a batch's tokens from 32 tokens on (33 -> 64),
more for short batches (10 -> 32).

Where it is used: the training scripts with `--compile` on CUDA (`use_on`). Not on a CPU: there is no CUDA graph
to replay there, torch.compile's CPU code takes a varying T after one recompile (minbert/bert/compiled.py), and a
CPU step's time is its arithmetic, so padded tokens would only cost time. A run without
--compile pads as before, to each batch's longest, and computes exactly what it did.
"""

import torch

BUCKETS = (32, 64, 128, 256, 512)   # BERT's longest input is 512 (max_position_embeddings)
PADDED = (("input_ids", "attention_mask", "token_type_ids"),          # (B, T) tensors padded on the right
          ("input_ids_b", "attention_mask_b", "token_type_ids_b"))     # sentence b of 'separate' pairs


def bucket_length(longest: int, max_length: int, buckets: tuple[int, ...] = BUCKETS) -> int:
    """The length a batch whose longest example has `longest` tokens is padded to: the smallest bucket that holds
    it, never more than `max_length` (--max_seq_len: the tokenizer already cut every example to it)."""
    if not 0 < longest <= max_length:
        raise ValueError(f"bucket_length: a batch's longest example must have 1..max_length={max_length} tokens, "
                         f"got {longest}")
    return next(b for b in (*(b for b in buckets if b < max_length), max_length) if b >= longest)


def pad_to_bucket(batch: dict, max_length: int, pad_id: int) -> dict:
    """`batch` with its (B, T) tensors padded on the right to bucket_length(T): ids pad_id, mask 0, types 0.
    Sentence a and, in 'separate' pair batches, sentence b each get their own bucket. Returns a new dict."""
    out = dict(batch)
    for ids, mask, types in PADDED:
        if ids not in batch:
            continue
        B, T = batch[ids].shape
        extra = bucket_length(T, max_length) - T
        if extra:
            out[ids] = torch.cat([batch[ids], batch[ids].new_full((B, extra), pad_id)], dim=1)
            out[mask] = torch.cat([batch[mask], batch[mask].new_zeros(B, extra)], dim=1)
            out[types] = torch.cat([batch[types], batch[types].new_zeros(B, extra)], dim=1)
    return out


def use_on(device: torch.device, *splits) -> bool:
    """`--compile`: on CUDA, every TaskData in `splits` pads its batches to BUCKETS from now on, and one line says
    so; elsewhere nothing changes. Returns whether it applied."""
    if device.type != "cuda":
        return False
    for split in splits:
        split.buckets = True
    print(f"compile: batches padded to the length buckets {', '.join(map(str, BUCKETS))} (at most --max_seq_len), "
          f"masked: few static shapes for the compiled step", flush=True)
    return True
