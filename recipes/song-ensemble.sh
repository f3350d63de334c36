#!/bin/sh
# Song, Hu & Pan's ensemble (§3.1, Algorithm 1; Table 3: 7 models, weighted average, dev overall 0.786).
# Their members differ in hyperparameters and structure and are not listed; here: the best single model with 7 seeds.
# Weights: Algorithm 1 ranked per task (--weights ranked); the prior weights are their hyperparameters, not stated: 1 each.
set -e
for seed in 1 2 3 4 5 6 7; do
  sh recipes/song-best.sh --seed $seed --out_dir runs/song-best-$seed
done
python -m minbert ensemble runs/song-best-1 runs/song-best-2 runs/song-best-3 runs/song-best-4 runs/song-best-5 \
    runs/song-best-6 runs/song-best-7 --method average --weights ranked --out_dir runs/song-ensemble
