#!/bin/sh
# Pritsky, Somerville & Huynh's best model (§4.4), without EDA data augmentation (not implemented):
#   1. AdvancedModel: Pal schedule + 1-layer ReLU heads + individual head pretraining (25 epochs, patience 3, lr 1e-3),
#      then fine-tuning at lr 1e-5 for 10 epochs, effective batch 128;
#   2. PALs (12 heads x 11 = 132) added after fine-tuning, only they train.
# Left out: the manual lr drops to 5e-6 and 1e-6 at the end (+0.06%), EDA, the SST adjustment matrix.
# Extra flags (e.g. --model minilm-l6 --pooling mean --limit 2000) are passed to both stages.
set -e
python train_multitask.py @recipes/pritsky-advanced.args "$@"
python train_multitask.py @recipes/pritsky-best.args "$@"
