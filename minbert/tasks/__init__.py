"""tasks: what the model is trained on and how it is scored.

The CS224N readers (data), GLUE (glue), the heads on top of the encoder (multitask, pair_heads), what a
training step draws, a task and its batch (sampling: the schedules, TaskData's padded batches), batches padded
to a few lengths for --compile on CUDA (length_buckets), scoring a split in input order (scoring: the one
evaluation loop of both scripts and of a finished run), the metrics (metrics), and a sentence-embedding
evaluation (embedding_eval).
"""
