#!/bin/sh
# Song, Hu & Pan's best single model: unsupervised SimCSE on 1M Wikipedia sentences -> PALs + strong SMART.
# Extra flags go to the fine-tuning stage (e.g. --seed 2 --out_dir runs/song-best-2).
set -e
[ -f runs/song-simcse/model/config.json ] || python -m minbert simcse @recipes/song-simcse.args
python train_multitask.py @recipes/song-best.args "$@"
