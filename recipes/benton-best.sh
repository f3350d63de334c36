#!/bin/sh
# Benton's best model, Figure 3 "Ann + Concat" (dev overall 0.784): one run. Extra flags go to train_multitask.py.
set -e
python train_multitask.py @recipes/benton-ann-concat.args "$@"
