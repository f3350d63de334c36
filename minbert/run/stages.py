"""Starting a multitask run from an earlier one: --init_from and --pals_after (stage chaining; docs/methods.md).

--init_from reuses a run's encoder and its heads/PALs whose names and shapes match (minbert/core/export.py);
--pals_after is --init_from plus zero-initialised PALs that alone train (Pritsky et al. §3.3.2), i.e. --pals
--pals_init zero --option pretrain. `resolve(args)` sets the flags they imply; `start(args, model)` loads, freezes,
and records in OUT_DIR/stage.json what the run started from (--predict_only, which trains nothing, never calls it).
"""

import os

from minbert.run import distributed
from minbert.core.export import STAGE, init_from, model_dir, summarise, write_json
from minbert.methods.pals import freeze_for_pals_after


def add_args(parser) -> None:
    g = parser.add_argument_group("stages: start from an earlier run (minbert/core/export.py)")
    g.add_argument("--init_from", default=None,
                   help="a previous run's --out_dir (or its model/ folder): its encoder replaces --model, and its "
                        "heads/PALs with matching names and shapes are reused (Muppet head reuse, stage chaining)")
    g.add_argument("--pals_after", default=None,
                   help="RUN_DIR of a fine-tuned run: add zero-initialised PALs and train only them "
                        "(Pritsky et al. §3.3.2)")
    g.add_argument("--pals_after_heads", action="store_true", help="with --pals_after: train the task heads too")


def resolve(args) -> None:
    """The flags --pals_after and --init_from imply."""
    if args.pals_after:
        args.init_from, args.pals, args.pals_init, args.option = args.pals_after, True, "zero", "pretrain"
    if args.init_from:
        args.model = str(model_dir(args.init_from))


def start(args, model) -> dict:
    """Load what --init_from reuses (not on --resume: the checkpoint has it), freeze for --pals_after,
    and write OUT_DIR/stage.json. Returns the stage record that model/stage.json gets at the end."""
    stage = {"model": args.model, "init_from": None, "pals_after": args.pals_after}
    if args.init_from and not args.resume:
        stage["init_from"] = init_from(args.init_from, {"heads": model.heads, "pals": model.pals})
        print(summarise(stage["init_from"]))
    if args.pals_after:     # only the PALs (and, if asked, the heads) train
        freeze_for_pals_after(model, train_heads=args.pals_after_heads)
    if distributed.is_main():
        write_json(os.path.join(args.out_dir, STAGE), stage)
    return stage
