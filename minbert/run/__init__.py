"""run: the machinery of a training run, kept out of the lesson.

Checkpoints and resume (checkpoint), the run folder, its outputs and the scripts' shared first steps (run_dir),
torchrun + DDP (distributed), one optimizer step with AMP and the non-finite skip (optimizer_step), the CPU/GPU
fast paths (fast_paths) and stages that start from an earlier run (stages).
"""
