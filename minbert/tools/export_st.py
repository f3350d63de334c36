"""python -m minbert export-st RUN_DIR OUT_DIR: a mean-pooled run's encoder as a sentence-transformers folder.

    python -m minbert export-st runs/quickstart runs/quickstart-st

and in Python: `SentenceTransformer("runs/quickstart-st").encode(sentences)`, the vectors of
`minbert.load_run("runs/quickstart").encode(sentences)`.

A train_multitask.py run with `--pooling mean` (the quick start's) reads each sentence as the mean of the
encoder's token states over its real tokens: exactly sentence-transformers' Transformer module followed by its
Pooling module in mean mode. The folder is the one `SentenceTransformer.save` writes (Reimers & Gurevych 2019),
as plain files: modules.json (Transformer here, then Pooling in 1_Pooling/), sentence_bert_config.json
(max_seq_length: the run's --max_seq_len), the run's encoder and tokenizer files, 1_Pooling/config.json (mean).
A run on BERT's pooler output (every train_mml.py run, train_multitask.py's default) or with PALs (one encoder per
task) has no such folder: the command says which, in one line, and writes nothing. `--dry_run` makes every check
the export makes (the run, its pooling, OUT_DIR) and says what it would write.
"""

import json
import shutil
import sys
from pathlib import Path

from minbert.core import flags
from minbert.core.atomic import atomic_write
from minbert.core.errors import UserError
from minbert.core.export import copy_tokenizer, write_json
from minbert.tools.export_hf import unused_out_dir

# what export_sentence_transformers writes into OUT_DIR
FILES = ("modules.json", "config.json", "model.safetensors", "vocab.txt", "tokenizer_config.json",
         "sentence_bert_config.json", "1_Pooling/config.json")


def parser():
    p = flags.ArgumentParser(prog="python -m minbert export-st", description=__doc__)
    p.add_argument("run_dir", help="the --out_dir of a finished train_multitask.py run trained with --pooling mean")
    p.add_argument("out_dir", help="the new folder that SentenceTransformer(OUT_DIR) loads")
    p.add_argument("--overwrite", action="store_true", help="replace what --out_dir already holds (default: refuse)")
    return p


def refusal(run) -> str | None:
    """Why `run`'s sentence vectors are not sentence-transformers' Transformer + mean Pooling, or None."""
    pooling = getattr(getattr(run, "model", None), "pooling", "pooler")   # a train_mml.py run reads the pooler output
    if pooling != "mean":
        return (f"its sentence vector is BERT's pooler output (--pooling {pooling}), not a mean of the token states: "
                f"train with --pooling mean for a sentence-transformers folder (python -m minbert export-hf makes a "
                f"pipeline folder of a pooler head)")
    if getattr(run.model, "pals", None) is not None:
        return "PALs (--pals) add task layers inside the encoder, so each task has its own encoder"
    return None


def export_sentence_transformers(directory, model_folder, max_seq_length: int) -> None:
    """Write the folder of the module docstring from a run's model folder (its encoder and tokenizer files)."""
    source, directory = Path(model_folder), Path(directory)
    (directory / "1_Pooling").mkdir(parents=True, exist_ok=True)
    for name in ("config.json", "model.safetensors"):   # byte copies of the run's encoder
        atomic_write(directory / name, lambda p, name=name: shutil.copyfile(source / name, p))
    copy_tokenizer(source, directory, max_seq_length)
    width = json.loads((source / "config.json").read_text())["hidden_size"]
    write_json(directory / "1_Pooling" / "config.json",
               {"word_embedding_dimension": width, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": True,
                "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False})
    write_json(directory / "sentence_bert_config.json", {"max_seq_length": max_seq_length, "do_lower_case": False})
    write_json(directory / "modules.json",
               [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}])


def main(argv=None):
    args = parser().parse(argv, sys.modules[__name__])   # --dry_run: describe(args) below, then exit
    out, run = checked(args)
    export_sentence_transformers(out, run.folder, run.max_seq_len)
    print(f"wrote {out}: {what(run)}; SentenceTransformer(\"{out}\") loads it")
    return out


def checked(args) -> tuple:
    """(OUT_DIR, run): every check of the export, before anything is written."""
    out = unused_out_dir(args.out_dir, args.overwrite)
    from minbert.tools.trained_run import load_run   # torch loads here, after the flags are checked
    run = load_run(args.run_dir, device="cpu", amp="off")
    if why := refusal(run):
        raise UserError(f"{run.folder}: not a sentence-transformers model: {why}")
    return out, run


def describe(args) -> list[tuple[str, str]]:
    """--dry_run's rows: the export's own checks made, what it would write."""
    out, run = checked(args)
    return [("would write", f"{out}: {what(run)} ({', '.join(FILES)})")]


def what(run) -> str:
    return f"the encoder with mean pooling, max_seq_length {run.max_seq_len}"

