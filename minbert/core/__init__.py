"""core: what every other layer stands on, and no lesson of its own.

Errors a user can act on (errors), files written atomically (atomic), flags and recipe files (flags,
recipes), the device and AMP choice (device), checkpoints from the hub (hub), model folders and raw
outputs (export), the training log: progress lines, steps.jsonl, metrics.jsonl, TensorBoard (progress),
Ctrl-C handling (interrupt) and result tables (report).
"""
