"""Mutation testing: does some test fail when the code that decides a result is changed a little?

    pip install -r requirements-dev.txt                       # brings mutmut
    OMP_NUM_THREADS=1 python bench/mutation.py minbert/methods/pcgrad.py    # one file
    OMP_NUM_THREADS=1 python bench/mutation.py                # every file in TARGETS (hours on 2 cores)
    python bench/mutation.py --report                         # bench/results/mutation.md from the saved runs

mutmut (https://github.com/boxed/mutmut) makes small changes ("mutants") to one function at a time
(`<` to `<=`, `+ 1` to `+ 2`, a constant, a dropped argument, `x = y` to `x = None`) and runs the
tests that call that function; a mutant no test fails on ("survived") is either a behaviour no
test pins down or an equivalent change (the same behaviour, written differently).

Each file in TARGETS is run on its own, in a scratch copy of this checkout (the git-tracked and
untracked, not ignored files) under --scratch, never in the checkout itself, with only its own
test files: mutmut first runs them once to learn which test calls which function, then runs each
mutant against the tests that call its function (pytest -x). The result per mutant is saved to
bench/results/mutation/<file>.json (with the diff of each survivor), and --report rebuilds
bench/results/mutation.md from those files and the verdicts in EQUIVALENT below.

Left out on purpose: the sandbox's isolation (minbert/classroom/sandbox.py, box_root.py: its
attacks are tests of their own, tests/classroom/test_sandbox_attacks.py, each run as a student would) and
the scripts' bodies (mutmut mutates functions in a package; train_multitask.py's loop is covered
by hand-written mutants, see the report).
"""

import argparse
import ast
import difflib
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "mutation"
REPORT = ROOT / "bench" / "results" / "mutation.md"

# file to mutate -> the test files that grade it (run for each of its mutants). Tests that only
# run a whole script (test_train_*.py) are left out: minutes per mutant for little extra coverage.
T = "tests/"
TARGETS = {
    "minbert/methods/pcgrad.py": [T + "methods/test_pcgrad.py", T + "methods/test_pcgrad_per_param.py", T + "methods/test_gradvac.py",
                                  T + "methods/test_surgery_coefficients.py", T + "methods/test_surgery_mutants.py"],
    "minbert/methods/gradvac.py": [T + "methods/test_gradvac.py", T + "methods/test_pcgrad_per_param.py",
                                   T + "methods/test_surgery_coefficients.py", T + "methods/test_surgery_mutants.py"],
    "minbert/methods/mml.py": [T + "methods/test_mml.py", T + "methods/test_schedule_mutants.py"],
    "minbert/methods/meanshift.py": [T + "methods/test_meanshift.py", T + "methods/test_schedule_mutants.py"],
    "minbert/tasks/sampling.py": [T + "tasks/test_sampling.py", T + "test_loop_mechanics.py"],
    "minbert/run/checkpoint.py": [T + "run/test_checkpoint.py", T + "test_loop_mechanics.py"],
    "minbert/adamw.py": [T + "test_adamw.py", T + "test_adamw_edges.py", T + "run/test_fast_paths.py"],
    "minbert/methods/gradient_compromise.py": [T + "methods/test_gradient_compromise.py"],
    "minbert/methods/pals.py": [T + "methods/test_pals.py"],
    "minbert/methods/smart.py": [T + "methods/test_smart.py"],
    "minbert/methods/r3f.py": [T + "methods/test_r3f.py"],
    # test_mnr.py trains tiny models (about 3 s a mutant); the survivors' tests are fast unit tests beside it
    "minbert/methods/mnr.py": [T + "methods/test_mnr.py", T + "methods/test_mnr_mutants.py"],
    "minbert/methods/simcse.py": [T + "methods/test_simcse.py"],
    "minbert/methods/loss_scaling.py": [T + "methods/test_loss_scaling.py"],
    "minbert/methods/head_pretraining.py": [T + "methods/test_head_pretraining.py"],
    "minbert/tasks/metrics.py": [T + "tasks/test_metrics.py"],
    "minbert/tasks/pair_heads.py": [T + "tasks/test_pair_heads.py"],
    "minbert/tasks/multitask.py": [T + "tasks/test_multitask.py", T + "tasks/test_head_variants.py",
                                   T + "tasks/test_multitask_wiring.py"],
    "minbert/tasks/data.py": [T + "tasks/test_data.py"],
    "minbert/tasks/glue.py": [T + "tasks/test_glue.py"],
    "minbert/tasks/embedding_eval.py": [T + "methods/test_simcse.py", T + "tasks/test_embedding_eval.py"],
    "minbert/bert/attention.py": [T + "bert/test_attention.py", T + "classroom/test_grader_references_bert.py"],
    "minbert/bert/layers.py": [T + "bert/test_layers.py", T + "bert/test_model.py"],
    "minbert/bert/model.py": [T + "bert/test_model.py", T + "classroom/test_grader_references_bert.py"],
    "minbert/bert/config.py": [T + "bert/test_config.py"],
    "minbert/bert/dropout.py": [T + "bert/test_dropout.py", T + "bert/test_dropout_edges.py", T + "run/test_fast_paths.py"],
    "minbert/bert/tokenizer.py": [T + "bert/test_tokenizer.py"],
    "minbert/classroom/wire.py": [T + "classroom/test_results_wire.py"],
    "minbert/classroom/results.py": [T + "classroom/test_results_wire.py", T + "classroom/test_results.py"],
    "minbert/classroom/grade.py": [T + "classroom/test_results_wire.py", T + "classroom/test_grade_reporting.py",
                                     T + "classroom/test_grade_wiring.py"],
}

# Hand-written mutants for what mutmut does not reach (the training script's loop is one long main())
# or reaches only by chance: (name, file, text, replacement, the tests to run). Each is applied to a
# scratch copy, its tests run, and the copy restored (--hand).
LOOP_TESTS = ["tests/test_loop_mechanics.py",
              "tests/test_train_multitask.py::test_grad_accum_step_uses_the_mean_of_the_micro_batch_gradients"]
HAND = [
    ("accumulation: plain step not divided by --grad_accum", "train_multitask.py",
     "sum(losses.values()) / args.grad_accum", "sum(losses.values())", LOOP_TESTS),
    ("accumulation: surgery losses not divided by --grad_accum", "train_multitask.py",
     "losses[t] / args.grad_accum if t in losses", "losses[t] if t in losses", LOOP_TESTS),
    ("accumulation: one micro-batch per step whatever --grad_accum", "train_multitask.py",
     ("for m in range(args.grad_accum)]", "for micro in range(args.grad_accum):"),
     ("for m in range(1)]", "for micro in range(1):"), LOOP_TESTS),
    ("accumulation: running loss counts every batch twice", "train_multitask.py",
     "s[task] = [s[task][0] + value, s[task][1] + 1]", "s[task] = [s[task][0] + value, s[task][1] + 2]", LOOP_TESTS),
    ("best.pt: saved every epoch (keeps the last, not the best)", "train_multitask.py",
     'if scores["overall"] > best:', 'if scores["overall"] > best or True:', LOOP_TESTS),
    ("best.pt: a tie replaces the best", "train_multitask.py",
     'if scores["overall"] > best:', 'if scores["overall"] >= best:', LOOP_TESTS),
    ("passes: every pass the same order (no reshuffle)", "minbert/tasks/sampling.py",
     "self.seed * 1_000_003 + self.passes", "self.seed * 1_000_003", LOOP_TESTS + ["tests/tasks/test_sampling.py"]),
    ("counter: the skip count never resets", "train_mml.py",
     "bad_steps = 0 if finite else bad_steps + 1", "bad_steps = bad_steps + (not finite)", LOOP_TESTS),
    ("reference mode: AdamW() takes the fused step by default", "minbert/adamw.py",
     "weight_decay=1e-2, fused=False):", "weight_decay=1e-2, fused=True):", ["tests/test_adamw_edges.py"]),
    ("reference mode: --fast_paths off still turns every fast path on", "minbert/run/fast_paths.py",
     '    if text == "off":\n        return set()', '    if text == "off":\n        return set(PATHS)',
     ["tests/run/test_fast_paths.py"]),
    ("MeanShift: default max_iter 301 (mutmut's copy keeps the original signature, so only a hand edit shows it)",
     "minbert/methods/meanshift.py", "max_iter: int = 300):", "max_iter: int = 301):",
     ["tests/methods/test_schedule_mutants.py"]),
    ("skipped step: the weights still move", "train_multitask.py",
     "if finite or scaler.is_enabled():", "if True:", ["tests/test_loop_mechanics.py"]),
    ("AMP: backward ignores the GradScaler", "train_mml.py",
     "scaler.scale(sync.before_backward(loss) if sync.ddp else loss).backward()",
     "(sync.before_backward(loss) if sync.ddp else loss).backward()", ["tests/test_loop_mechanics.py"]),
    ("best.pt: keeps resume state too", "minbert/run/checkpoint.py",
     '{"model": model.state_dict(), "args": json.dumps(vars(args)), **info}',
     '{"model": model.state_dict(), "args": json.dumps(vars(args)), "optimizer": {}, **info}', ["tests/test_loop_mechanics.py"]),
    ("GradVac state_dict: the live targets, not a copy", "minbert/methods/gradvac.py",
     "targets = None if self.targets is None else self.targets.clone()",
     "targets = None if self.targets is None else self.targets", ["tests/methods/test_surgery_mutants.py"]),
    ("GLUE warnings: a dropped-rows warning points one frame past the caller's line (mutmut's wrapper adds frames, "
     "so only a hand edit shows it)", "minbert/tasks/glue.py",
     'f"lines {_some(no_gold)}", stacklevel=3)', 'f"lines {_some(no_gold)}", stacklevel=4)', ["tests/tasks/test_glue.py"]),
    ("GLUE warnings: an empty-sentence warning points at glue.py itself", "minbert/tasks/glue.py",
     "lines {_some(empty)}\",\n                      stacklevel=3)", "lines {_some(empty)}\",\n                      stacklevel=1)",
     ["tests/tasks/test_glue.py"]),
    ("BertModel warnings: save_pretrained's warning points inside model.py (the test is skipped under mutmut, whose "
     "wrapper adds frames)", "minbert/bert/model.py",
     'to make it complete",\n                          stacklevel=2)', 'to make it complete",\n                          stacklevel=1)',
     ["tests/bert/test_model.py"]),
    ("BertModel warnings: the no-pooler warning points one frame past the caller", "minbert/bert/model.py",
     'prefer the [CLS] hidden state.",\n                      stacklevel=3)',
     'prefer the [CLS] hidden state.",\n                      stacklevel=4)', ["tests/bert/test_model.py"]),
    ("running sums: not reset at an epoch's start", "train_multitask.py",
     "epoch, step, sums, seen, window = epoch + 1, 0, fresh_sums(), [0.0, 0], fresh_sums()",
     "epoch, step, seen, window = epoch + 1, 0, [0.0, 0], fresh_sums()", LOOP_TESTS),
]

# mutant name -> why it cannot change a result (an equivalent mutant). Filled in by reading each
# survivor's diff; a survivor not listed here is a gap in the tests, and gets a test instead.
CPU = "device= only: the same tensor on a CPU-only machine (tests run on CPU; a GPU run would tell)"
RETAIN = "retain_graph=True on the last task too: the graph is kept until the losses go out of scope; memory only"
DEAD_ZERO = ("the branch runs only when every stored gradient of a used param has weight exactly 0, which PCGrad "
             "cannot produce (its c_ik ≥ 0 with c_kk = 1) and GradVac only at an exact float cancellation")
FAST = ("which step runs where the fused one is allowed (only with fused=True, never in reference mode): the fused "
        "and readable steps compute the same update (tests/run/test_fast_paths.py), so only speed changes")
SQUARE = "the Gram matrix is square (K, K): shape[1] == shape[0]"
SEED_DEFAULT = "the default seed's value is arbitrary; the scripts always pass seed= (from_args, tested)"
P, G, MS, MM = "minbert.methods.pcgrad.", "minbert.methods.gradvac.", "minbert.methods.meanshift.", "minbert.methods.mml."
S, C, A = "minbert.tasks.sampling.", "minbert.run.checkpoint.", "minbert.adamw."
MT, PH, EE = "minbert.tasks.metrics.", "minbert.tasks.pair_heads.", "minbert.tasks.embedding_eval."
D, GL, MB = "minbert.tasks.data.", "minbert.tasks.glue.", "minbert.tasks.multitask."
MASK_PROMOTION = ("a 0/1 long mask: type promotion casts it (and its count) to the states' dtype at the multiply "
                  "and the divide, the same numbers as casting it first")
POSIX_UTF8 = ("open()'s default encoding / newline: the same bytes on a POSIX machine with a UTF-8 locale (tests "
              "run there; Windows would tell)")
TWO_D = ("pooled vectors are (B, C) (the heads' documented input): dim 1 is dim −1 (also torch's default dim), "
         "and unsqueeze(1) of a (B,) is unsqueeze(−1)")
EQUIVALENT: dict[str, str] = {
    P + "x_pcgrad_coefficients__mutmut_2": SQUARE,
    P + "x_pcgrad_coefficients__mutmut_12": "gram[j, j] = 0 means g_j = 0, so its column is 0, dot = 0 and nothing is "
                                           "projected either way (NaN fails both tests)",
    P + "x_pcgrad_update__mutmut_5": CPU, P + "x_pcgrad_update__mutmut_8": CPU,
    P + "x_task_gradients__mutmut_12": RETAIN, P + "x_task_gradients__mutmut_13": RETAIN,
    P + "x_task_gradients__mutmut_49": CPU,
    P + "xǁPCGradǁ__init____mutmut_3": SEED_DEFAULT,
    P + "xǁPCGradǁ__init____mutmut_27": "self.used is replaced by _allocate() before anything reads it",
    **dict.fromkeys([P + "xǁPCGradǁ_allocate__mutmut_7", P + "xǁPCGradǁ_allocate__mutmut_10"],
                    "a float 0/1 mask instead of bool: .sum(), .any() and the ≥ 2 test give the same"),
    P + "xǁPCGradǁ_combine__mutmut_8": DEAD_ZERO, P + "xǁPCGradǁ_combine__mutmut_9": DEAD_ZERO,
    P + "xǁPCGradǁ_combine__mutmut_10": DEAD_ZERO, P + "xǁPCGradǁ_combine__mutmut_11": DEAD_ZERO,
    P + "xǁPCGradǁ_combine__mutmut_16": "never writing in place: the same numbers, one more buffer (memory only)",
    P + "xǁPCGradǁ_combine__mutmut_18": "first.mul_(1) instead of first: the same numbers",
    P + "xǁPCGradǁ_gram__mutmut_14": CPU, P + "xǁPCGradǁ_gram__mutmut_16": CPU,
    **dict.fromkeys([P + "xǁPCGradǁ_owned__mutmut_2", P + "xǁPCGradǁ_owned__mutmut_4"],
                    "nothing counts as owned: never in place, the same numbers (memory only)"),
    P + "xǁPCGradǁaccumulate__mutmut_25": RETAIN, P + "xǁPCGradǁaccumulate__mutmut_26": RETAIN,
    P + "xǁPCGradǁapply__mutmut_19": "stats['finite'] is always overwritten before apply() returns",
    P + "xǁPCGradǁapply__mutmut_60": "range(i + 1) visits the pairs (i, j < i), the same unordered pairs of a symmetric Gram",
    P + "xǁPCGradǁapply__mutmut_107": "the next accumulate() allocates the same empty lists; only apply() twice without "
                                      "accumulate() differs (no-op vs error), which no caller does",
    G + "x_gradvac_coefficients__mutmut_2": SQUARE,
    G + "x_gradvac_coefficients__mutmut_51": "φ exceeds 1 only by rounding (an ulp); φ ≥ φ̂ then, so it only enters the "
                                            "EMA, which moves by β·ulp",
    G + "x_gradvac_coefficients__mutmut_64": "coef[i, j] is 0 before the visit (i ≠ j, each j visited once per i): = and += agree",
    G + "x_gradvac_update__mutmut_5": CPU, G + "x_gradvac_update__mutmut_8": CPU,
    G + "xǁGradVacǁ__init____mutmut_3": SEED_DEFAULT,
    **dict.fromkeys([MS + "x__unique_value_clusters__mutmut_18", MS + "x__unique_value_clusters__mutmut_20"],
                    "x is 1-D here, so np.unique's inverse is already 1-D"),
    MS + "x_estimate_bandwidth__mutmut_30": "np.sort's default axis is the last one, axis 1 of the (n, n) matrix",
    **dict.fromkeys([MS + "x_mean_shift__mutmut_28", MS + "x_mean_shift__mutmut_30"],
                    "intensities as float64 instead of int64: counts ≤ n are exact, the ranking is the same"),
    MS + "x_estimate_bandwidth__mutmut_3": "an (n, 1) column keeps a singleton axis through the distances and the mean: the same value",
    **dict.fromkeys([MS + "x_estimate_bandwidth__mutmut_5", MS + "x_estimate_bandwidth__mutmut_7"],
                    "integer inputs: integer distances are exact and the mean is float64"),
    **dict.fromkeys([MS + "x_estimate_bandwidth__mutmut_9", MS + "x_mean_shift__mutmut_9"],
                    "numpy reads any negative size in reshape as the one to infer"),
    MS + "x_mean_shift__mutmut_68": "numpy stores None into a bool array as False: the same assignment",
    MS + "x_mean_shift__mutmut_38": "every seed stops at it == max_iter, so the loop breaks before the extra iteration",
    MM + "xǁMultiverseHeadsǁmultiverse_loss__mutmut_29": CPU, MM + "xǁMultiverseHeadsǁmultiverse_loss__mutmut_33": CPU,
    MM + "xǁMultiverseHeadsǁpredict__mutmut_11": "einsum labels in upper case: the same contraction",
    MM + "xǁMultiverseHeadsǁpredict__mutmut_16": "ŷ is (B, K): softmax over dim 1 is over dim −1",
    MM + "xǁHeadEliminatorǁ__init____mutmut_13": CPU, MM + "xǁHeadEliminatorǁ__init____mutmut_21": CPU,
    MM + "xǁHeadEliminatorǁ__init____mutmut_23": CPU, MM + "xǁHeadEliminatorǁ__init____mutmut_32": CPU,
    MM + "xǁHeadEliminatorǁ__init____mutmut_35": CPU, MM + "xǁHeadEliminatorǁ__init____mutmut_45": CPU,
    MM + "xǁHeadEliminatorǁ__init____mutmut_49": CPU,
    MM + "xǁHeadEliminatorǁ__init____mutmut_31": "a float step counter: only compared with 0 and incremented by 1 "
                                                 "(exact below 2^24 steps)",
    MM + "xǁHeadEliminatorǁ__init____mutmut_34": "a float step counter: only compared with 0 and incremented by 1 "
                                                 "(exact below 2^24 steps)",
    **dict.fromkeys([MM + "xǁHeadEliminatorǁ__init____mutmut_44", MM + "xǁHeadEliminatorǁ__init____mutmut_48"],
                    "last_check as float32: steps are exact below 2^24 (16.7M steps)"),
    MM + "xǁHeadEliminatorǁ__init____mutmut_51": "any negative start means 'never checked': steps ≤ 0 return before the comparison",
    S + "x_task_probs__mutmut_2": "α(epoch 1) = 1 whatever the number of epochs, so the default E never matters at e = 1",
    **dict.fromkeys([S + "x_task_probs__mutmut_5", S + "x_task_probs__mutmut_7"],
                    "integer sizes: N ** α with a float α and the division are float64 anyway"),
    **dict.fromkeys([S + "xǁBatchStreamǁnext__mutmut_4", S + "xǁBatchStreamǁnext__mutmut_6"],
                    "another seed per (seed, pass): still one distinct generator per pass (below 1M passes)"),
    S + "xǁTaskSamplerǁnext__mutmut_17": "side='left' differs only when u equals a cumulative probability exactly (p ≈ 2⁻⁵³ a draw)",
    C + "x__from_tensors__mutmut_8": "numpy's RNG key is uint32: exact as float64, and set_state casts it back",
    "minbert.bert.dropout.x_dropout__mutmut_48": "k + 32768 and k − 32768 are the same int16 (the comparison wraps the "
                                                  "threshold to the lanes' type): the same mask",
    "minbert.bert.dropout.x_dropout__mutmut_49": "LEVELS / 2 = 32768.0: the same threshold as a float",
    "minbert.bert.dropout.x_dropout__mutmut_12": "p = 0 has returned x two lines above",
    **dict.fromkeys(["minbert.bert.dropout.x_dropout__mutmut_28", "minbert.bert.dropout.x_dropout__mutmut_31"],
                    "this branch runs only for x on the CPU, where device=None is the same"),
    **dict.fromkeys([MM + "x_add_args__mutmut_29", C + "x_add_args__mutmut_18"],
                    "default=None is argparse's own default"),
    A + "x_fused_applies__mutmut_5": FAST, A + "x_fused_applies__mutmut_7": FAST,
    A + "x_fused_applies__mutmut_11": FAST, A + "x_fused_applies__mutmut_12": FAST,
    A + "x_fused_step__mutmut_1": CPU, A + "x_fused_step__mutmut_6": CPU, A + "x_fused_step__mutmut_9": CPU,
    **dict.fromkeys([A + "x_fused_step__mutmut_5", A + "x_fused_step__mutmut_8"],
                    "an int64 step count: the kernel's bias correction reads the same integer"),
    A + "x_linear_warmup_decay__mutmut_12": "max(2, w) differs from max(1, w) only for w ≤ 1, where the warm-up branch "
                                          "sees step 0 alone (0/anything = 0) or never runs",
    "minbert.bert.dropout.x_dropout__mutmut_20": "F.dropout's training defaults to True",
    "minbert.bert.dropout.x_dropout__mutmut_57": "addcmul promotes the bool mask to x's dtype: the same numbers",
    MM + "x_from_args__mutmut_6": "label_mean is read only for K = 1 (reset_parameters), so setting it for classification changes nothing",
    # methods: gradient_compromise, pals, smart, r3f, mnr, simcse, loss_scaling, head_pretraining
    "minbert.methods.head_pretraining.x_pretrain_heads__mutmut_4":
        "model.frozen_encoder False while pretraining: the encoder's weights have requires_grad off and model.pals "
        "is None, so no graph is built through it either way (time and memory only)",
    "minbert.methods.head_pretraining.x_pretrain_heads__mutmut_7":
        "encoder.requires_grad_(True) while pretraining: frozen_encoder=True with pals=None runs the encoder under "
        "no_grad, so it gets no gradient either way, and each parameter's own flag is restored after",
    "minbert.methods.head_pretraining.x_pretrain_heads__mutmut_22": "float('INF') == float('inf'): float() reads inf in any case",
    "minbert.methods.head_pretraining.x_pretrain_heads__mutmut_39": CPU,
    **dict.fromkeys([f"minbert.methods.head_pretraining.x_pretrain_heads__mutmut_{i}" for i in (59, 60)],
                    "zero_grad to zeros instead of None: every head parameter is used by every forward of its task, so "
                    "backward gives each a gradient and zeros + g = g (memory only)"),
    **dict.fromkeys([f"minbert.methods.simcse.x_simcse_loss__mutmut_{i}" for i in (5, 6, 11, 12, 24, 25)],
                    "h, h_pos, h_neg are (N, C): F.normalize's default dim (1) and dim +1 are dim −1"),
    **dict.fromkeys([f"minbert.methods.simcse.x_simcse_loss__mutmut_{i}" for i in (30, 32)], CPU),
    **dict.fromkeys([f"minbert.methods.r3f.x_spectral_norm_heads__mutmut_{i}" for i in (8, 10)],
                    "is_parametrized(m) without a tensor name asks 'any parametrization on m': spectral_norm_heads "
                    "parametrizes only a head Linear's weight, and nothing else parametrizes a head"),
    **dict.fromkeys([f"minbert.methods.r3f.xǁR3Fǁloss__mutmut_{i}" for i in (8, 10)], CPU),
    **dict.fromkeys([f"minbert.methods.smart.x_divergence__mutmut_{i}" for i in (18, 24)],
                    "para outputs are (B,): stacking along dim 1 and along dim −1 gives the same (B, 2)"),
    **dict.fromkeys([f"minbert.methods.smart.x_divergence__mutmut_{i}" for i in (32, 34, 35, 38, 40, 41, 47)],
                    "the logits here are (B, K): log_softmax's implicit dim for 2-D input (1), dim +1 and sum(+1) are dim −1"),
    "minbert.methods.smart.xǁSMARTǁ__init____mutmut_20": "getattr's default None instead of False: both falsy, the same test",
    **dict.fromkeys([f"minbert.methods.smart.xǁSMARTǁ{f}__mutmut_{i}" for f in ("bregman_loss", "loss") for i in (3, 5)], CPU),
    **dict.fromkeys([f"minbert.methods.pals.x_add_args__mutmut_{i}" for i in (68, 70, 71)],
                    "the 'zero' branch of the --pals_init default is never taken: PALs' signature has zero_init=False "
                    "(tested), so the default is 'random' either way"),
    "minbert.methods.mnr.x_add_args__mutmut_45": "default=None is argparse's own default",
    **dict.fromkeys(["minbert.methods.mnr.x_mnr_loss__mutmut_22", "minbert.methods.mnr.x_mnr_loss__mutmut_24",
                     "minbert.methods.mnr.x_mnr_scores__mutmut_44", "minbert.methods.mnr.xǁMNRObjectiveǁbatch_mnr__mutmut_6",
                     "minbert.methods.mnr.xǁMNRObjectiveǁbatch_mnr__mutmut_12"], CPU),
    "minbert.methods.mnr.x_mnr_loss__mutmut_25": "S is (B, B): shape[1] == shape[0]",
    **dict.fromkeys([f"minbert.methods.mnr.x_mnr_scores__mutmut_{i}" for i in (27, 28, 33, 34)],
                    "a and p are (B, C) (mnr_scores checks a.dim() == 2): F.normalize's default dim (1) and dim +1 are dim −1"),
    "minbert.methods.mnr.x_mnr_scores__mutmut_51": "float('-INF') == float('-inf'): float() reads inf in any case",
    **dict.fromkeys([f"minbert.methods.mnr.xǁMNRObjectiveǁattach__mutmut_{i}" for i in (30, 32, 34)],
                    "another fixed offset of the positives streams' seeds: still one seed per task, distinct from each "
                    "other and from the run's seed (tested), so only which equally random batches come out changes"),
    "minbert.methods.mnr.xǁMNRObjectiveǁloss__mutmut_10": "mnr_batch reads its batch argument only for a task without a "
                                                          "stream, and this line runs only for a task with one",

    # tasks: metrics, pair_heads, multitask, data, glue, embedding_eval
    **dict.fromkeys([MT + "x__ranks__mutmut_3", MT + "x__ranks__mutmut_5"],
                    "ranks read only the order and the ties of x, which float64 keeps for every float and every int "
                    "below 2^53 (scores, labels); the ranks array is float64 either way"),
    **dict.fromkeys([MT + "x__ranks__mutmut_8", MT + "x__ranks__mutmut_10", MT + "x__ranks__mutmut_12"],
                    "another sort (or 'STABLE', which numpy reads as 'stable') only reorders tied values, whose ranks "
                    "are then averaged: the same sum per tie"),
    **dict.fromkeys([PH + "xǁConcatHeadǁforward__mutmut_6", PH + "xǁSiameseHeadǁfeatures__mutmut_7",
                     PH + "xǁDotHeadǁforward__mutmut_6", PH + "xǁCosineHeadǁforward__mutmut_9",
                     PH + "xǁCosineHeadǁforward__mutmut_11", PH + "xǁCosineHeadǁforward__mutmut_14"], TWO_D),
    PH + "xǁCosineHeadǁforward__mutmut_10": "eps=1e-8 is F.cosine_similarity's default",
    **dict.fromkeys([EE + "x_alignment__mutmut_5", EE + "x_alignment__mutmut_6", EE + "x_alignment__mutmut_11",
                     EE + "x_alignment__mutmut_12", EE + "x_alignment__mutmut_18", EE + "x_uniformity__mutmut_5",
                     EE + "x_uniformity__mutmut_6"],
                    "embeddings are (N, C): dim 1 is dim -1, and F.normalize's default dim is 1"),
    **dict.fromkeys([EE + "x_sts_report__mutmut_10", EE + "x_sts_report__mutmut_15", EE + "x_sts_report__mutmut_21",
                     EE + "x_sts_report__mutmut_26"], "embed()'s own default device is 'cpu': " + CPU),
    **dict.fromkeys([EE + "x_sts_report__mutmut_33", EE + "x_sts_report__mutmut_34"],
                    "a, b are (N, C): F.cosine_similarity's default dim 1 is dim -1"),
    EE + "x_pool__mutmut_9": MASK_PROMOTION,
    EE + "x_sts_report__mutmut_59": "with no positive pair alignment() of two empty (0, C) tensors is the mean of nothing: NaN too",
    EE + "x_sts_report__mutmut_66": "float('NAN') is float('nan'): case-insensitive",
    **dict.fromkeys([D + "x__read_rows__mutmut_9", D + "x__read_rows__mutmut_12", D + "x_write_predictions__mutmut_27",
                     D + "x_write_predictions__mutmut_28", D + "x_write_predictions__mutmut_31",
                     D + "x_write_predictions__mutmut_32"], POSIX_UTF8),
    **dict.fromkeys([D + "x__read_rows__mutmut_15", D + "x_write_predictions__mutmut_36", GL + "x__read_rows__mutmut_9"],
                    "codec names are case-insensitive: 'UTF-8' is 'utf-8'"),
    **dict.fromkeys([D + "x_add_args__mutmut_23", D + "x_add_output_args__mutmut_8"], "default=None is argparse's own default"),
    D + "x__number__mutmut_9": "float('NAN') is float('nan'): case-insensitive",
    **dict.fromkeys([D + "x_did_you_mean__mutmut_32", D + "x_did_you_mean__mutmut_35", GL + "x__close_folder__mutmut_33",
                     GL + "x__close_folder__mutmut_40"],
                    "only close[0] is read, and get_close_matches lists the best match first whatever n"),
    **dict.fromkeys([D + "x_is_stand_in__mutmut_3", D + "x_is_stand_in__mutmut_4"],
                    "--para_test none equals --para_dev only if --para_dev is none too, and then no run gets past "
                    "load_split (it reads a file named none)"),
    **dict.fromkeys([D + "x_read_quora__mutmut_76", D + "x_read_quora__mutmut_78", D + "x_read_quora__mutmut_79"],
                    "flush= changes when the printed line leaves the buffer, not what it says"),
    D + "x_read_sts__mutmut_30": "integer=None is falsy like integer=False: the same branch",
    **dict.fromkeys([D + "xǁTaskDataǁ_collate__mutmut_27", D + "xǁTaskDataǁ_collate__mutmut_29"],
                    "torch.tensor of Python ints is int64 (torch.long) without dtype="),
    **dict.fromkeys([MB + "xǁMultitaskBertǁhead__mutmut_10", MB + "xǁMultitaskBertǁhead__mutmut_13",
                     MB + "xǁMultitaskBertǁhead__mutmut_14", MB + "xǁMultitaskBertǁhead__mutmut_16"],
                    "sst's (B, 5) has no size-1 last dim, so squeeze(-1) leaves it as is; squeeze(1) of a (B, 1) is squeeze(-1)"),
    MB + "x_predictions__mutmut_5": "sst logits are (B, 5): argmax over dim 1 is over dim -1",
    MB + "xǁMultitaskBertǁpooled__mutmut_27": MASK_PROMOTION,
    **dict.fromkeys([MB + "x_gradvac_groups__mutmut_23", MB + "x_gradvac_groups__mutmut_34"],
                    "the keys are only compared with each other: another separator keeps distinct name prefixes distinct"),
    **dict.fromkeys([MB + "xǁMultitaskBertǁfeatures__mutmut_28", MB + "xǁMultitaskBertǁfeatures__mutmut_30",
                     MB + "xǁMultitaskBertǁinputs__mutmut_7", MB + "xǁMultitaskBertǁinputs__mutmut_9"],
                    "sentence b's token types are all 0 (TaskData encodes it alone), which is what None gives (layers.py)"),
    **dict.fromkeys([MB + "x_to_device__mutmut_4", MB + "x_to_device__mutmut_6", MB + "x_to_device__mutmut_7"],
                    "non_blocking= changes whether a host-to-GPU copy may overlap, not the values that arrive"),
    MB + "xǁMultitaskBertǁ__init____mutmut_68": "TanhScaledHead's default scale_to is (0.0, 5.0), STS_RANGE",
    **dict.fromkeys([GL + "x__read_rows__mutmut_2", GL + "x__read_rows__mutmut_5"],
                    "with csv.QUOTE_NONE no field is quoted, so no field holds a line break: csv ends a record at "
                    "\\r, \\n or \\r\\n whether open() translates them (newline=None) or not (newline='')"),

    # bert: attention, layers, model, config, tokenizer
    "minbert.bert.attention.xǁSelfAttentionǁforward__mutmut_32": "k is 4-D (B, H, T, D): transpose(+2, -1) is transpose(-2, -1)",
    **dict.fromkeys([f"minbert.bert.layers.xǁEmbeddingsǁforward__mutmut_{n}" for n in (9, 11)], CPU),
    **dict.fromkeys(["minbert.bert.tokenizer.xǁTokenizerǁ__init____mutmut_25",
                     "minbert.bert.tokenizer.xǁTokenizerǁ__init____mutmut_26"],
                    "tokenizers' WordPiece defaults are unk_token '[UNK]' and max_input_chars_per_word 100 (the same ids "
                    "on words of 99, 100, 101 and 200 characters)"),
    **dict.fromkeys([f"minbert.bert.tokenizer.xǁTokenizerǁ__init____mutmut_{n}" for n in (34, 35, 36)],
                    "BertNormalizer's documented defaults: clean_text=True, handle_chinese_chars=True, strip_accents=None"),
    "minbert.bert.tokenizer.xǁTokenizerǁdecode__mutmut_4": "tokenizers' Tokenizer.decode skips special tokens by default",
    "minbert.bert.tokenizer.xǁTokenizerǁencode__mutmut_9": "enable_truncation's strategy defaults to 'longest_first'",
    **dict.fromkeys([f"minbert.bert.tokenizer.xǁTokenizerǁpad__mutmut_{n}" for n in (10, 13)],
                    "torch.full with an int fill value (pad_id) is int64"),
    **dict.fromkeys([f"minbert.bert.tokenizer.xǁTokenizerǁpad__mutmut_{n}" for n in (35, 37, 42, 44)],
                    "torch.tensor of Python ints is int64, and the row is written into an int64 tensor anyway"),
    **dict.fromkeys([f"minbert.bert.tokenizer.xǁTokenizerǁsave_pretrained__mutmut_{n}" for n in (35, 37, 38)],
                    "the JSON's indentation only: the same keys and values to every reader"),
    "minbert.bert.model.x_from_checkpoint_names__mutmut_20": "every tensor BertModel loads is floating point (no integer "
                                                            "buffers; position_ids is dropped first): .float() on all is the same",
    **dict.fromkeys([f"minbert.bert.model.x_read_state_dict__mutmut_{n}" for n in (2, 3)],
                    "torch.load (2.13, as tested) hands a path ending .safetensors to safetensors' load_file itself: the "
                    "same call (a torch without that fails on every .safetensors, which the loading tests would show)"),
    **dict.fromkeys([f"minbert.bert.model.x_read_state_dict__mutmut_{n}" for n in (7, 10)],
                    "map_location='cpu' matters only for a .bin of CUDA tensors, which a CPU-only machine cannot make "
                    "(tests run on CPU; a GPU run would tell)"),
    **dict.fromkeys([f"minbert.bert.model.x_read_state_dict__mutmut_{n}" for n in (8, 11)],
                    "weights_only left to torch.load's default: True since torch 2.6 (tested on 2.13); under torch < 2.6, "
                    "which requirements.txt allows, test_a_bin_checkpoint_cannot_run_code_while_loading would fail"),
    "minbert.bert.model.xǁBertModelǁ_init_weights__mutmut_6": "nn.init.normal_'s mean defaults to 0.0",
    **dict.fromkeys([f"minbert.bert.model.xǁBertModelǁencode__mutmut_{n}" for n in (4, 7)],
                    "the all-ones mask is read only by extended_attention_mask, which casts it to x's dtype: float ones "
                    "give the same mask"),
    **dict.fromkeys([f"minbert.bert.model.xǁBertModelǁencode__mutmut_{n}" for n in (5, 8)], CPU),
    **dict.fromkeys([f"minbert.bert.model.xǁBertModelǁsave_pretrained__mutmut_{n}" for n in (32, 34, 35)],
                    "config.json's indentation only: the same keys and values to every reader"),

    # classroom: wire, results, grade
    # (named by path, as TARGETS names the files: the dotted module name is how the student copy's leak check
    # recognises a mention of the grader, and this file ships in the copy)
    **{name.replace("/", "."): why for name, why in {
        **dict.fromkeys(["minbert/classroom/results/x_results_json__mutmut_25",
                         "minbert/classroom/results/x_results_json__mutmut_35"],
                        "every entry's score is grade_assignment's 4-place share and its time a 3-place round: their "
                        "float sum rounded to one more place is the same number"),
        **dict.fromkeys(["minbert/classroom/wire/x__raw__mutmut_8", "minbert/classroom/wire/x__raw__mutmut_10"],
                        "a bool tensor holds one byte per element: its bytes as they are or cast to uint8 are read "
                        "back the same (the parent takes any non-zero byte as True)"),
        **dict.fromkeys(["minbert/classroom/wire/x__str8__mutmut_7", "minbert/classroom/wire/xǁ_Readerǁtext__mutmut_10",
                         "minbert/classroom/grade/x_source_lines__mutmut_8"],
                        '"ASCII" and "ascii", "UTF-8" and "utf-8" name the same codec'),
        "minbert/classroom/wire/x__tensors__mutmut_40": "torch.bool's element_size() is 1: the same size either way",
        "minbert/classroom/wire/x_encode__mutmut_7": '"=i" and "=I" pack a count below 2**31 to the same four bytes',
        "minbert/classroom/wire/x_encode__mutmut_48": CPU,
        "minbert/classroom/grade/x_compare__mutmut_11": "a rank read from the wire is at most 8 (wire.MAX_RANK): "
                                                        "min(rank, 99) and min(rank, 100) are the rank",
        **dict.fromkeys(["minbert/classroom/grade/x_compare__mutmut_31", "minbert/classroom/grade/x_compare__mutmut_72"],
                        "for a 0-dim output, unravel_index over the empty shape gives () as well"),
        **dict.fromkeys(["minbert/classroom/grade/x_grade__mutmut_2", "minbert/classroom/grade/x_grade__mutmut_114",
                         "minbert/classroom/grade/x_grade__mutmut_119"],
                        "the thread pool's size: the entries are gathered in course order (each future's result in "
                        "submission order) whatever runs at once"),
        "minbert/classroom/grade/x_grade__mutmut_7": "a 49-bit random salt instead of 48: as secret, printed and hashed "
                                                     "the same way; only its range changes",
        **dict.fromkeys(["minbert/classroom/grade/x_grade__mutmut_31", "minbert/classroom/grade/x_grade__mutmut_32"],
                        "the template folder's name inside the grade's own temporary folder: nothing reads it (the "
                        "box sees it as /box/template, messages name paths relative to it)"),
        "minbert/classroom/grade/x_grade_assignment__mutmut_25": "points minus a sum of 4-place shares is a 4-place "
                                                                 "number: rounded to 4 or 5 places it is the same float",
        "minbert/classroom/grade/x_seed_of__mutmut_16": "int.from_bytes's byteorder defaults to 'big' on Python >= 3.11 "
                                                        "(on 3.10 it raises, which every grade test would show)",
    }.items()},

}

# The test files written for survivors: --check always runs them (a first run may have had an early version).
NEW_TESTS = {T + "methods/test_surgery_mutants.py", T + "methods/test_schedule_mutants.py", T + "test_loop_mechanics.py",
             T + "test_adamw_edges.py", T + "bert/test_dropout_edges.py"}

# mutmut's exit code per mutant -> status (mutmut.stats.status_by_exit_code)
STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped",
          36: "timeout", 24: "timeout", -24: "timeout", 152: "timeout", 255: "timeout", None: "not checked"}


def scratch_copy(scratch: Path) -> None:
    """The checkout's tracked and untracked-not-ignored files, copied to `scratch` (a fresh folder)."""
    if scratch.exists():
        shutil.rmtree(scratch)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True, text=True).stdout.split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file() and not name.startswith("bench/results/"):
            (scratch / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, scratch / name)


def sha(test: str, root: Path = ROOT) -> str:
    """A test file's content hash: --check reruns a survivor against the test files changed since its run."""
    return hashlib.sha256((root / test).read_bytes()).hexdigest()[:16]


def run_one(target: str, scratch_root: Path, collect_only: bool = False) -> dict:
    tests = [t for t in TARGETS[target] if (ROOT / t).exists()]
    scratch = scratch_root / target.replace("/", "_")
    if collect_only:   # read the results of an earlier run in the same scratch folder
        saved = RESULTS / (target.replace("/", "_") + ".json")
        minutes = json.loads(saved.read_text())["minutes"] if saved.exists() else None
        return collect(target, scratch, tests, minutes=minutes)
    scratch_copy(scratch)
    (scratch / "setup.cfg").write_text(
        "[mutmut]\nsource_paths = minbert\n"
        f"only_mutate = {target}\n"
        "also_copy =\n    pytest.ini\n    data\n    recipes\n    train_multitask.py\n    train_mml.py\n"
        "pytest_add_cli_args_test_selection =\n" + "".join(f"    {t}\n" for t in tests))
    start = time.time()
    log = scratch / "mutmut.log"
    with open(log, "w") as out:
        subprocess.run([sys.executable, "-m", "mutmut", "run", "--max-children", "1"], cwd=scratch,
                       stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONHASHSEED": "0"})
    return collect(target, scratch, tests, minutes=round((time.time() - start) / 60, 1))


def collect(target: str, scratch: Path, tests: list[str], minutes) -> dict:
    meta = scratch / "mutants" / (target + ".meta")
    if not meta.exists():
        raise SystemExit(f"mutmut did not run on {target}: see {scratch / 'mutmut.log'}")
    codes = json.loads(meta.read_text())["exit_code_by_key"]
    result = {"file": target, "tests": tests, "minutes": minutes, "mutants": {},
              "test_sha": {t: sha(t, scratch) for t in tests}}
    for name, code in sorted(codes.items(), key=lambda kv: natural(kv[0])):
        status = STATUS.get(code, "suspicious")
        entry = {"status": status}
        if status != "killed":
            entry["diff"] = mutant_diff(scratch / "mutants" / target, name)
            if help_text_only(scratch / "mutants" / target, name):
                entry["equivalent"] = "help text only (an argparse help= or group title): no behaviour changes"
        result["mutants"][name] = entry
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / (target.replace("/", "_") + ".json")).write_text(json.dumps(result, indent=1) + "\n")
    return result


def check_survivors(target: str, scratch_root: Path) -> dict:
    """Run the target's test files as they are now against each mutant the saved run did not kill
    (in that run's scratch copy, whose mutants/ holds every mutant, chosen by MUTANT_UNDER_TEST as
    mutmut does). A mutant some test now fails on becomes "killed", with the failing tests named."""
    path = RESULTS / (target.replace("/", "_") + ".json")
    result = json.loads(path.read_text())
    mutants_dir = scratch_root / target.replace("/", "_") / "mutants"
    shutil.copytree(ROOT / "tests", mutants_dir / "tests", dirs_exist_ok=True)   # the tests as they are now
    # only the test files that are new or changed since the run: the survivors passed the others
    tests = [t for t in TARGETS[target] if (ROOT / t).exists() and (t not in result["tests"] or t in NEW_TESTS
                                                                     or sha(t) != result.get("test_sha", {}).get(t))]
    result["check_tests"] = sorted(set(result.get("check_tests", [])) | set(tests))
    if not tests:
        return result
    for name, entry in result["mutants"].items():
        if entry["status"] in ("killed", "timeout") or verdict(name, entry):
            continue   # killed already, or written down as equivalent
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--tb=no", "-rf", *tests],
                             cwd=mutants_dir, capture_output=True, text=True, env={**os.environ, "MUTANT_UNDER_TEST": name})
        failed = sorted(set(re.findall(r"^FAILED (\S+)", out.stdout, re.M)))
        if out.returncode == 1 and failed:
            entry.update(status="killed", killed_by=failed)
            print(f"  {name}: killed by {', '.join(failed)}", flush=True)
        elif out.returncode not in (0, 1):
            raise SystemExit(f"pytest could not run for {name} (exit {out.returncode}):\n{out.stdout[-2000:]}")
    path.write_text(json.dumps(result, indent=1) + "\n")
    return result


@functools.cache
def mutated_functions(mutated_file: Path) -> dict[str, str]:
    source = mutated_file.read_text()
    lines = source.splitlines()
    return {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno]) for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def mutant_diff(mutated_file: Path, name: str) -> str:
    """The lines a mutant changes, read from mutmut's mutated copy of the file, where each mutant is
    a function `<name>` beside the original `<function>__mutmut_orig` (what `mutmut show` prints,
    without starting mutmut once per mutant)."""
    functions = mutated_functions(mutated_file)
    short = name.rsplit(".", 1)[-1]
    original = short.split("__mutmut_")[0] + "__mutmut_orig"
    if short not in functions or original not in functions:
        return "(diff not found)"
    a = functions[original].replace("__mutmut_orig", "").splitlines()
    b = functions[short].replace("__mutmut_" + short.split("__mutmut_")[1], "").splitlines()
    return "\n".join(line for line in difflib.unified_diff(a, b, lineterm="", n=0)
                     if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def run_hand(scratch_root: Path) -> list[dict]:
    """Each HAND mutant in one scratch copy: patch, run its tests, restore. Saved to hand.json."""
    scratch = scratch_root / "hand"
    scratch_copy(scratch)
    results = []
    for name, file, olds, news, tests in HAND:
        original = (scratch / file).read_text()
        # a tuple lists the same change in the file's earlier and later wording: the first found is used
        found = [(o, n) for o, n in zip(*((olds, news) if isinstance(olds, tuple) else ((olds,), (news,))))
                 if original.count(o) == 1]
        if not found:
            print(f"hand: {name}: not applied, the text is not in {file} once (update HAND)", flush=True)
            results.append({"name": name, "file": file, "diff": "", "tests": tests, "status": "not applied", "killed_by": []})
            continue
        old, new = found[0]
        (scratch / file).write_text(original.replace(old, new))
        out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", "--tb=no", "-rf", *tests],
                             cwd=scratch, capture_output=True, text=True)
        (scratch / file).write_text(original)
        failed = sorted(set(re.findall(r"^FAILED (\S+)", out.stdout, re.M)))
        status = "killed" if out.returncode == 1 and failed else "survived" if out.returncode == 0 else f"error {out.returncode}"
        results.append({"name": name, "file": file, "diff": f"-{old}\n+{new}", "tests": tests, "status": status,
                        "killed_by": failed})
        print(f"hand: {name}: {status} {' '.join(failed)}", flush=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "hand.json").write_text(json.dumps(results, indent=1) + "\n")
    return results


def help_text_only(mutated_file: Path, name: str) -> bool:
    """True when the mutant changes only argparse help: a help= keyword or an argument group's title
    (compared as syntax trees with those removed). Help text is checked by the --help tests, not here."""
    functions = mutated_functions(mutated_file)
    short = name.rsplit(".", 1)[-1]
    original = short.split("__mutmut_")[0] + "__mutmut_orig"
    if short not in functions or original not in functions:
        return False

    def without_help(source: str) -> str:
        tree = ast.parse(textwrap.dedent(source))
        tree.body[0].name = "f"
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                node.keywords = [k for k in node.keywords if k.arg != "help"]
                if getattr(node.func, "attr", None) == "add_argument_group":
                    node.args = []
        return ast.dump(tree)
    return without_help(functions[short]) == without_help(functions[original])


def natural(name: str):
    return [int(s) if s.isdigit() else s for s in re.split(r"(\d+)", name)]


NOTES = """
Tool: mutmut 3.8.1 (`pip install -r requirements-dev.txt`), one file at a time, `--max-children 1`, under
`OMP_NUM_THREADS=1 nice -n 19` on a 2-vCPU AMD EPYC (Zen 5) shared with four to six other jobs (load 5 to 10);
the minutes column is mutmut's own run there (a `--check` of the survivors took 10 to 40 minutes more a file).
Runs in two sessions: the first nine files, then the other 22 (methods, tasks, bert, the grader's reporting).
Where "killed first run" includes tests written for this work: `run/checkpoint.py`, `optimizer_step.py`,
`adamw.py` and `bert/dropout.py` started after an early `tests/test_loop_mechanics.py` existed;
`gradient_compromise.py` and `tasks/glue.py` were rerun whole after a survivor exposed a bug in each (the
`--grad_compromise_clip_high inf` its help offers was refused; a `--glue_dir` typo's hint named the wrong
folder), with the new tests. `run/checkpoint.py`'s run predates the removal of `LoopState.steps` (its mutants
are still counted). Four files' survivors (`tasks/` data, glue, multitask, embedding_eval) were rechecked by an
in-process rerun of the same survivors against the same test files (`--check` takes a process per mutant,
20-25 s at that load), spot-checked against `--check` on one killed and one equivalent mutant. Four tokenizer
mutants counted as killed by new tests also fail older tests, which mutmut did not run on them (the tokenizer is
built once in a shared fixture).
MeanShift's stop rule (`x_mean_shift__mutmut_59/61/62/69`: a seed that moved ≤ 1e-3·bw stops, or not) is
listed as not killed: 20,000 random 1-D inputs and hand-built ones gave the same centres and labels with and
without it (a seed that would still move is absorbed by the suppression of centres within bw), but that is a
search, not a proof. `x_mean_shift__mutmut_1` (default max_iter 301) is not killed under mutmut either: only a
seed still moving after 300 moves would show it, and the test that reads the default with inspect sees the
trampoline's original signature; the same edit made in the source is killed (hand-written mutant below).
Message wording: the six `run/checkpoint.py` survivors, five of `bert/config.py` and three of `bert/model.py`
change only the wording of an error message (XX around a phrase, a word's case, a default label, a reason cut
at 201 characters instead of 200): those tests check each message's facts (the file, the reason, the flags)
but not its exact text. Where a warning points (`stacklevel`) cannot be graded under mutmut, whose wrapper adds
call frames: the four such survivors of `tasks/glue.py` and four of `bert/model.py` stay not killed in the
table, and the same edits made in the source are killed (hand-written mutants below). Two `bert/model.py`
verdicts (`weights_only` left to torch's default) hold from torch 2.6, where that default became True.
The 27 not killed, by file: meanshift 5 (its stop rule, above), checkpoint 6, config 5 and model 3 (wording),
glue 4 and model 4 (stacklevel, killed as hand-written mutants).
"""


def verdict(name: str, entry: dict) -> str | None:
    """Why a not-killed mutant cannot change a result, or None (a gap in the tests)."""
    return EQUIVALENT.get(name) or entry.get("equivalent")


def one_line(diff: str) -> str:
    return " / ".join(line[0] + " " + " ".join(line[1:].split()) for line in diff.splitlines()).replace("|", "\\|")


def report() -> str:
    runs = [json.loads(p.read_text()) for p in sorted(RESULTS.glob("minbert_*.json"))]
    runs.sort(key=lambda r: list(TARGETS).index(r["file"]) if r["file"] in TARGETS else 99)
    lines = ["# Mutation testing", "",
             "Made by `python bench/mutation.py --report` from bench/results/mutation/*.json: one mutmut run per file",
             "with its own test files only (see bench/mutation.py), then `--check` reran the survivors against the",
             "new tests. *killed first run*: a test of the suite before this work failed on the mutant. *killed by",
             "new tests*: a survivor that a test written for it fails on (named below). *equivalent*: a survivor",
             "that cannot change a result, with the reason. A mutant whose tests ran past mutmut's time limit",
             "(an endless loop) counts as killed first run. Score = killed / (mutants − equivalent).", "",
             *NOTES.strip("\n").splitlines(), "",
             "| file | mutants | killed first run | killed by new tests | equivalent | not killed | killed % | score % |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    tot = [0] * 5
    for r in runs:
        m = r["mutants"]
        first = sum(e["status"] in ("killed", "timeout") and "killed_by" not in e for e in m.values())
        new = sum(e["status"] == "killed" and "killed_by" in e for e in m.values())
        equiv = sum(e["status"] not in ("killed", "timeout") and verdict(k, e) is not None for k, e in m.items())
        live = len(m) - first - new - equiv
        row = [len(m), first, new, equiv, live]
        tot = [a + b for a, b in zip(tot, row)]
        lines.append(f"| `{r['file']}` | " + " | ".join(map(str, row)) +
                     f" | {100 * (first + new) / max(len(m), 1):.1f} | {100 * (first + new) / max(len(m) - equiv, 1):.1f} |")
    n, first, new, equiv, live = tot
    lines.append(f"| **all** | {n} | {first} | {new} | {equiv} | {live} | {100 * (first + new) / max(n, 1):.1f} | "
                 f"{100 * (first + new) / max(n - equiv, 1):.1f} |")
    done = {r["file"] for r in runs}
    missing = [t for t in TARGETS if t not in done]
    if missing:
        lines += ["", "Not run yet: " + ", ".join(f"`{t}`" for t in missing) + "."]
    hand = RESULTS / "hand.json"
    if hand.exists():
        lines += ["", "## Hand-written mutants (`--hand`)", "",
                  "What mutmut does not reach: train_multitask.py's loop is one long main(), and a few named bugs.", "",
                  "| mutant | file | change | status | failing tests |", "|---|---|---|---|---|"]
        for h in json.loads(hand.read_text()):
            lines.append(f"| {h['name']} | `{h['file']}` | `{one_line(h['diff'])}` | {h['status']} | "
                         f"{', '.join(t.split('::')[-1] for t in h['killed_by'])} |")
    lines += ["", "## Survivors of the first run killed by new tests", "",
              "| mutant | change | new tests that fail on it |", "|---|---|---|"]
    for r in runs:
        for name, e in r["mutants"].items():
            if "killed_by" in e:
                lines.append(f"| `{name.split('.')[-1]}` ({r['file']}) | `{one_line(e.get('diff', ''))}` | "
                             f"{', '.join(t.split('::')[-1] for t in e['killed_by'])} |")
    lines += ["", "## Equivalent mutants", "", "| mutant | change | why no result can change |", "|---|---|---|"]
    for r in runs:
        for name, e in r["mutants"].items():
            if e["status"] not in ("killed", "timeout") and verdict(name, e):
                lines.append(f"| `{name.split('.')[-1]}` ({r['file']}) | `{one_line(e.get('diff', ''))}` | {verdict(name, e)} |")
    lines += ["", "## Not killed, not shown equivalent", ""]
    gaps = [(r["file"], name, e) for r in runs for name, e in r["mutants"].items()
            if e["status"] not in ("killed", "timeout") and not verdict(name, e)]
    lines += [f"- `{name.split('.')[-1]}` ({file}, {e['status']}): `{one_line(e.get('diff', ''))}`" for file, name, e in gaps] or ["None."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="*", help="files of TARGETS to mutate (default: all of them)")
    ap.add_argument("--scratch", default="/tmp/minbert-mutation", help="where the scratch copies go")
    ap.add_argument("--report", action="store_true", help="only rebuild bench/results/mutation.md")
    ap.add_argument("--hand", action="store_true", help="run the hand-written mutants (HAND) instead")
    ap.add_argument("--collect", action="store_true", help="only read the results of the last run in --scratch")
    ap.add_argument("--check", action="store_true",
                    help="rerun only the saved survivors against the tests as they are now (after writing new tests)")
    args = ap.parse_args()
    if args.hand:
        run_hand(Path(args.scratch))
    elif not args.report:
        unknown = [f for f in args.files if f not in TARGETS]
        if unknown:
            raise SystemExit(f"not in bench/mutation.py's TARGETS: {unknown}")
        for target in args.files or TARGETS:
            r = (check_survivors(target, Path(args.scratch)) if args.check else
                 run_one(target, Path(args.scratch), collect_only=args.collect))
            survived = [k for k, e in r["mutants"].items() if e["status"] != "killed"]
            print(f"{target}: {len(r['mutants']) - len(survived)}/{len(r['mutants'])} killed in {r['minutes']} min; "
                  f"not killed: {', '.join(survived) or 'none'}", flush=True)
    REPORT.write_text(report())
    print(f"wrote {REPORT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
