"""Exporting a run's model, and starting the next stage from it (stage chaining; the papers' pipelines and the
folder's files, RUN_DIR/model/ and RUN_DIR/outputs.pt: docs/methods.md, docs/outputs.md).

`export` writes the encoder in Hugging Face names (what --model reads), the tokenizer, the task modules (what
--init_from reads, `init_from`) and stage.json (the record that rebuilds the run: tools/trained_run.py).
`export_hf_classifier` writes one head with the encoder as a Hugging Face BertForSequenceClassification folder.
Left out: optimizer state (a new stage starts a new optimizer, as in the papers), and the training-only SimCSE MLP.
"""

import json
import shutil
from pathlib import Path

import torch
from torch import nn

from minbert.core.atomic import atomic_write
from minbert.core.errors import UserError

MODEL_DIR = "model"                       # RUN_DIR/model: the exported model folder
TASK_MODULES = "task_modules.safetensors"
STAGE = "stage.json"
OUTPUTS = "outputs.pt"


def model_dir(path) -> Path:
    """The exported model folder of `path`: a run directory (its model/ subfolder) or the
    model folder itself."""
    path = Path(path)
    for candidate in (path, path / MODEL_DIR):
        if (candidate / "config.json").is_file():
            return candidate
    raise UserError(f"{path}: not an exported model (no config.json in it or in {path / MODEL_DIR}); "
                    "pass the --out_dir of a finished train_multitask.py / train_mml.py / "
                    "python -m minbert simcse run, or its model/ folder")


def write_json(path, record: dict) -> None:
    text = json.dumps(record, indent=1, default=str)
    atomic_write(Path(path), lambda tmp: Path(tmp).write_text(text))


def export(directory, encoder, tokenizer, modules: dict[str, nn.Module] | None = None,
           stage: dict | None = None, script: str | None = None, model_args: dict | None = None) -> None:
    """Write the model folder of the module docstring. `modules` ({"heads": ..., "pals": ...}) go into
    task_modules.safetensors; `script` and `model_args` (a training script's model) into stage.json beside `stage`."""
    from safetensors.torch import save_file
    directory = Path(directory)
    encoder.save_pretrained(directory, tokenizer=tokenizer)
    state = {}
    for prefix, module in (modules or {}).items():
        if module is not None:
            state |= {f"{prefix}.{k}": v.detach().cpu().contiguous() for k, v in module.state_dict().items()}
    if state:
        atomic_write(directory / TASK_MODULES, lambda p: save_file(state, p, metadata={"format": "pt"}))
    record = {"script": script, "model_args": model_args} if script else {}
    write_json(directory / STAGE, (stage or {}) | record)


def init_from(path, modules: dict[str, nn.Module | None]) -> dict:
    """Copy every tensor of `path`'s task_modules.safetensors whose name (prefix.name) and shape
    match into `modules`. Returns {"from", "loaded", "fresh", "unused"} lists of names."""
    from safetensors.torch import load_file
    directory = model_dir(path)
    file = directory / TASK_MODULES
    if not file.is_file():
        raise UserError(f"--init_from {path}: {file} is missing; it was exported without task heads "
                        "(a SimCSE encoder, say): pass it as --model instead")
    saved = load_file(str(file))
    report = {"from": str(directory), "loaded": [], "fresh": [], "unused": []}
    for prefix, module in modules.items():
        if module is None:
            continue
        state = module.state_dict()
        for name, tensor in state.items():
            key = f"{prefix}.{name}"
            if key not in saved:
                report["fresh"].append(key)
                continue
            if saved[key].shape != tensor.shape:
                raise UserError(f"--init_from {path}: {key} has shape {tuple(saved[key].shape)} there but "
                                f"{tuple(tensor.shape)} here; use the same --head / --pals_size / pair-head "
                                "flags as that run")
            state[name] = saved[key]
            report["loaded"].append(key)
        module.load_state_dict(state)
    report["unused"] = sorted(set(saved) - set(report["loaded"]))
    return report


def summarise(report: dict) -> str:
    """One line for the log: which groups (heads.sst, pals, ...) were loaded, fresh or unused."""
    def groups(names):
        return sorted({".".join(n.split(".")[:2]) for n in names})
    return (f"started from {report['from']}: loaded {groups(report['loaded'])}, "
            f"fresh {groups(report['fresh'])}, unused {groups(report['unused'])}")


# ---------------------------------------------------------------------- a head for Hugging Face's tools
def copy_tokenizer(source: Path, directory: Path, max_length: int) -> None:
    """vocab.txt as it is, and tokenizer_config.json with model_max_length = `max_length` (the run's --max_seq_len:
    `truncation=True` then cuts inputs as the run did)."""
    atomic_write(directory / "vocab.txt", lambda p: shutil.copyfile(source / "vocab.txt", p))
    write_json(directory / "tokenizer_config.json",
               json.loads((source / "tokenizer_config.json").read_text()) | {"model_max_length": max_length})


def export_hf_classifier(directory, model_folder, weight: torch.Tensor, bias: torch.Tensor, labels,
                         problem_type: str, max_length: int) -> None:
    """Write a Hugging Face BertForSequenceClassification folder: `model_folder`'s encoder (under `bert.`),
    `weight` (K, C) and `bias` (K,) as its `classifier` (pooler output -> dropout -> classifier, HF's shape),
    id2label from `labels`, `problem_type` (which loss HF trains with and what `pipeline("text-classification")`
    applies: softmax, sigmoid for multi_label_classification, none for regression) and the tokenizer files.
    Plain files: minbert itself never imports transformers."""
    from safetensors.torch import load_file, save_file
    source, directory = Path(model_folder), Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {f"bert.{k}": v for k, v in load_file(str(source / "model.safetensors")).items()}
    state |= {"classifier.weight": weight.detach().float().cpu().contiguous(),
              "classifier.bias": bias.detach().float().cpu().contiguous()}
    atomic_write(directory / "model.safetensors", lambda p: save_file(state, p, metadata={"format": "pt"}))
    config = json.loads((source / "config.json").read_text())
    config |= {"architectures": ["BertForSequenceClassification"], "problem_type": problem_type,
               "id2label": {str(i): name for i, name in enumerate(labels)},
               "label2id": {name: i for i, name in enumerate(labels)}}
    write_json(directory / "config.json", config)
    copy_tokenizer(source, directory, max_length)


# ---------------------------------------------------------------------- raw outputs for ensembles
def save_outputs(path, results: dict, dev: dict) -> None:
    """Store `run_heads` results {split: {task: (ids, index, outputs)}} with the dev labels, in
    the order the prediction files were written: {split: {task: {"ids", "outputs"[, "labels"]}}}.
    Outputs are the heads' raw values: sst (N, 5) logits, para (N,) logits, sts (N,) scores."""
    record = {}
    for split, per_task in results.items():
        record[split] = {}
        for task, (ids, index, out) in per_task.items():
            entry = {"ids": list(ids), "outputs": out.detach().float().cpu()}
            if split == "dev":
                entry["labels"] = dev[task].labels[index].cpu()
            record[split][task] = entry
    atomic_write(Path(path), lambda tmp: torch.save(record, tmp))


def load_outputs(run_dir) -> dict:
    path = Path(run_dir) / OUTPUTS
    if not path.is_file():
        raise UserError(f"{run_dir}: no {OUTPUTS}; it is written at the end of a train_multitask.py run "
                        "(rerun it, or pass the run's --out_dir)")
    return torch.load(path, map_location="cpu", weights_only=True)
