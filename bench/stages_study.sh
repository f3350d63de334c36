#!/bin/bash
# CPU study of the pipeline stages: SimCSE, PALs after fine-tuning, pre-finetuning -> MML,
# an output ensemble. MiniLM, the shipped sample data, tiny equal budgets (--limit 600, 1 epoch).
# Run from the repository root:  bash bench/stages_study.sh all   (results: runs/stages/*.log, members.md)
# Figures and the machine they were measured on: docs/methods.md, "Pipelines".
set -e
D=${DATA:-data}
G=${GLUE:-data/glue_data}
R=runs/stages
PY="nice -n 10 python -u"   # under load from other jobs, also export OMP_NUM_THREADS=1
mkdir -p $R
mt() {  # mt NAME args...: one train_multitask.py run into $R/NAME
  local name=$1; shift
  local preds=()
  for t in sst para sts; do for s in dev test; do preds+=(--${t}_${s}_out $R/$name/predictions/$t-$s-output.csv); done; done
  $PY train_multitask.py --data_dir $D --para_train $D/quora-train-sample.csv --para_dev $D/quora-dev-sample.csv \
    --para_test none --batch_size 32 --lr 1e-4 --head_lr 1e-3 --epochs 1 --hidden_dropout_prob 0.1 --pooling mean \
    --max_seq_len 64 --limit 600 --out_dir $R/$name "${preds[@]}" "$@" > $R/$name.log 2>&1
}
mml() {  # mml NAME args...: one train_mml.py run (RTE) into $R/NAME
  local name=$1; shift
  $PY train_mml.py --task RTE --method mml --glue_dir $G --limit 400 --epochs 2 --lr 5e-5 \
    --eliminate_every 10 --out_dir $R/$name "$@" > $R/$name.log 2>&1
}
all() {
  # SimCSE on the task sentences (paper defaults, 30 steps of 64), then multitask from it
  $PY -m minbert simcse --model minilm-l6 --data cs224n --data_dir $D --para_train $D/quora-train-sample.csv \
      --max_steps 30 --out_dir $R/simcse-cls --seed 1 > $R/simcse-cls.log 2>&1
  mt base-s1 --model minilm-l6 --seed 1
  mt base-s2 --model minilm-l6 --seed 2
  mt simcse-mt-s1 --model $R/simcse-cls/model --seed 1
  mt palsafter-s1 --pals_after $R/base-s1 --seed 1
  # Muppet-style pre-finetuning (heterogeneous batches, scaled losses; 19 steps x 3 tasks = the same examples)
  mt prefinetune-s1 --model minilm-l6 --heterogeneous --scale_losses --steps_per_epoch 19 --seed 1
  mml mml-minilm --model minilm-l6
  mml mml-prefinetuned --model $R/prefinetune-s1/model
  python -m minbert ensemble $R/base-s1 $R/base-s2 $R/simcse-mt-s1 $R/prefinetune-s1 --out_dir $R/ensemble
}
"$@"
