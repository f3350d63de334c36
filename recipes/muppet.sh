#!/bin/sh
# Muppet pipeline: multi-task pre-finetuning (heterogeneous batches in the natural mix, loss scaling) -> fine-tuning,
# on RTE (a new task: the encoder only) and on the CS224N tasks again (--init_from reuses the heads).
set -e
python train_multitask.py @recipes/muppet-prefinetune.args
python train_mml.py @recipes/muppet-rte.args
python train_multitask.py --init_from runs/muppet-prefinetune --lr 2e-5 --batch_size 32 --epochs 5 --out_dir runs/muppet-ft
