"""run: the machinery of a training run, kept out of the lesson.

Checkpoints and resume (checkpoint), the run folder, its outputs and the scripts' shared first steps (run_dir),
torchrun + DDP (distributed), the CPU/GPU fast paths (fast_paths) and stages that start from an earlier run
(stages). The optimizer step and the loop's state are the scripts' own, written in their loops.
"""
