"""A finished run, loaded for use: its model and heads on new sentences, in the order they were given.

A run folder of train_multitask.py or train_mml.py holds its best model as RUN_DIR/model/
(minbert/core/export.py): the encoder (config.json, model.safetensors, vocab.txt), the heads
(task_modules.safetensors) and the flags it trained with (stage.json, "args"). `load_run(RUN_DIR)` rebuilds
that model from those flags, in eval mode, and answers:

    train_multitask.py   sentiment(sentences)  SST-5: label 0-4, its name, the 5 probabilities (softmax of the logits)
                         paraphrase(pairs)     Quora: the probability of a paraphrase (sigmoid of the one logit)
                         similarity(pairs)     STS: the head's score (trained on 0-5)
    train_mml.py         classify(inputs)      its GLUE task: label, name and probabilities, or the STS-B score;
                                               MML's heads as train_mml.py scores them (Malkiel & Wolf, Eq. 5: the
                                               softmax of the mean of the active heads' logits)
    both                 encode(sentences)     (N, C): the pooled vector a head reads
                         predict(inputs)       one record per input: what `python -m minbert predict` prints

Inputs are tokenized and batched as the scripts evaluate (minbert/tasks/data.py: length-sorted batches, the run's
--max_seq_len), and the outputs are put back in input order. `hf_head(task)` gives a head in the shape of Hugging
Face's BertForSequenceClassification (pooler -> dropout -> one linear layer), or says in one line why it has
another shape (`python -m minbert export-hf`).

A run folder may come from someone else, so loading it runs no code: tensors come from safetensors files only
(never a pickle: no pytorch_model.bin, no .pt), the flags from JSON, each checked by the scripts' own flag
definitions (types, choices, ranges), and the tensors must fit the model those flags describe, with no key
missing, extra or misshapen; the model is built on the meta device first, so a flag asking for a huge model
costs nothing before that check. Anything wrong is one UserError naming the file.
"""

import argparse
import json
import math
from pathlib import Path

import torch
from tqdm import tqdm

from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.core import flags
from minbert.core.device import autocast, pick_device, resolve_amp
from minbert.core.errors import UserError
from minbert.core.export import MODEL_DIR, STAGE, TASK_MODULES
from minbert.methods import mml, pals, r3f
from minbert.tasks import glue, multitask
from minbert.tasks.data import Example, TaskData
from minbert.tasks.multitask import CROSS_HEADS, SST_LABELS, TASKS, to_device

FILES = ("config.json", "model.safetensors", "vocab.txt", TASK_MODULES, STAGE)   # what a run's model/ holds
# the flags that shape the model (and its inputs), read from stage.json; every other one is for training
MULTITASK_FLAGS = ("head", "head_layers", "head_activation", "pooling", "para_head", "sts_head", "fast_attention",
                   "pals", "pals_size", "pals_heads", "r3f", "r4f", "max_seq_len")
MML_FLAGS = ("task", "method", "heads", "max_seq_len")
BATCH_SIZE = 64   # the scripts' evaluation batch (max(64, --batch_size)): the same batches, the same numbers


def load_run(path, device: str = "auto", amp: str = "auto", batch_size: int = BATCH_SIZE) -> "TrainedRun":
    """The run in `path` (its --out_dir, or that folder's model/) on `device`, under `amp` (as the scripts'
    --device and --amp). Raises a UserError for a folder that is not a finished run."""
    folder = _model_folder(Path(path))
    record = _read_json(folder / STAGE)
    saved = record.get("args") if isinstance(record, dict) else None
    if not isinstance(saved, dict):
        raise UserError(f"{folder / STAGE}: no \"args\" object (the flags the run trained with); it is not a "
                        f"train_multitask.py or train_mml.py run")
    kind = "multitask" if "sts_head" in saved else "mml" if "method" in saved else None
    if kind is None:
        raise UserError(f"{folder / STAGE}: the flags are neither train_multitask.py's nor train_mml.py's")
    tensors = _read_tensors(folder / TASK_MODULES)
    if kind == "multitask":
        args = _flags(saved, folder / STAGE, MULTITASK_FLAGS, multitask, pals, r3f)
        if args.head == "mlp" and args.head_layers > len(tensors):   # each hidden layer has tensors in the file
            raise UserError(f"{folder / STAGE}: head_layers {args.head_layers}, but {folder / TASK_MODULES} holds "
                            f"only {len(tensors)} tensors")
    else:
        args = _flags(saved, folder / STAGE, MML_FLAGS, mml, glue)
    encoder = _encoder(folder, args.fast_attention if kind == "multitask" else False)
    C = encoder.config.hidden_size
    with torch.device("meta"):   # the heads' shapes, without memory, until they are checked against the file
        if kind == "multitask":
            args.model, args.hidden_dropout_prob = str(folder), 0.0   # what from_args reads besides the flags above
            model = multitask.from_args(args, encoder, pals.from_args(args, encoder.config, TASKS))
            if args.r4f:   # R4F's heads are stored spectrally normalised (minbert/methods/r3f.py)
                r3f.spectral_norm_heads(model)
            modules = {"heads": model.heads, "pals": model.pals}
        else:
            num_labels = glue.TASKS[args.task].num_labels
            heads = mml.MultiverseHeads(C, num_labels, mml.resolve_num_heads(args.method, C, args.heads))
            modules = {"heads": heads}
    _load_strict(modules, tensors, folder / TASK_MODULES)
    device = pick_device(device)
    amp, _ = resolve_amp(amp, device)
    tokenizer = Tokenizer.from_pretrained(folder)
    if kind == "multitask":
        return MultitaskRun(folder, args, model.to(device).eval(), tokenizer, device, amp, batch_size)
    return MMLRun(folder, args, encoder.to(device).eval(), heads.to(device).eval(), tokenizer, device, amp,
                  batch_size)


class TrainedRun:
    """What both kinds of run share: the tokenizer, the device, and batches put back in input order."""

    tasks: tuple = ()

    def __init__(self, folder, args, tokenizer, device, amp, batch_size):
        self.folder, self.args, self.tokenizer = folder, args, tokenizer
        self.device, self.amp, self.batch_size = device, amp, batch_size

    def __repr__(self):
        return f"<{type(self).__name__} {self.folder}: tasks {', '.join(self.tasks)}>"

    def data(self, inputs, pair: bool, what: str, pair_mode: str = "cross") -> TaskData | None:
        """The inputs tokenized as the scripts do; None for no inputs. `pair`: what `what` reads."""
        rows = _rows(inputs)
        if rows and (rows[0][1] is not None) != pair:
            raise UserError(f"{what} reads {'sentence pairs' if pair else 'one sentence each'}, but the inputs are "
                            f"{'single sentences' if rows[0][1] is None else 'pairs'}")
        if not rows:
            return None
        examples = [Example(str(i), a, b, None) for i, (a, b) in enumerate(rows)]
        return TaskData(examples, self.tokenizer, self.args.max_seq_len, pair_mode=pair_mode)

    @torch.inference_mode()
    def in_order(self, data: TaskData | None, forward, after=None) -> torch.Tensor:
        """forward(batch) under --amp on every batch, then after(outputs) in fp32; rows back in input order."""
        if data is None:
            return torch.empty(0)
        out = None
        batches = data.batches(self.batch_size, shuffle=False)   # length-sorted, as the scripts' evaluation
        for batch in tqdm(batches, desc="predict", total=math.ceil(len(data) / self.batch_size), leave=False,
                          disable=None):   # a bar on a terminal only
            with autocast(self.device, self.amp):
                y = forward(to_device(batch, self.device))
            y = (after or (lambda t: t))(y.float()).cpu()
            out = torch.empty((len(data), *y.shape[1:])) if out is None else out
            out[batch["index"]] = y
        return out

    def check_tasks(self, tasks, default) -> tuple:
        tasks = tuple([tasks] if isinstance(tasks, str) else tasks or default)
        unknown = [t for t in tasks if t not in self.tasks]
        if unknown:
            raise UserError(f"unknown task {unknown[0]!r}: {self.folder} answers {', '.join(self.tasks)}")
        return tasks


class MultitaskRun(TrainedRun):
    """A train_multitask.py run: SST-5, Quora paraphrase and STS heads on one encoder."""

    tasks = TASKS

    def __init__(self, folder, args, model, tokenizer, device, amp, batch_size):
        super().__init__(folder, args, tokenizer, device, amp, batch_size)
        self.model = model

    def outputs(self, task: str, inputs) -> torch.Tensor:
        """The head's raw outputs, in input order: sst (N, 5) logits, para (N,) logits, sts (N,) scores."""
        data = self.data(inputs, task != "sst", task, "separate" if self.model.bi_encoder(task) else "cross")
        return self.in_order(data, lambda batch: self.model(task, batch))

    def sentiment(self, sentences) -> list[dict]:
        """SST-5 for each sentence: {"label": 0-4, "name": the handout's name, "probabilities": 5 floats}."""
        logits = self.outputs("sst", sentences)
        return [{"label": int(z.argmax()), "name": SST_LABELS[int(z.argmax())], "probabilities": z.softmax(-1).tolist()}
                for z in logits]

    def paraphrase(self, pairs) -> list[float]:
        """The probability that each (a, b) is a paraphrase (the script writes 1 where it is > 0.5)."""
        return torch.sigmoid(self.outputs("para", pairs)).tolist()

    def similarity(self, pairs) -> list[float]:
        """The STS score of each (a, b), on the 0-5 scale the head was trained on."""
        return self.outputs("sts", pairs).tolist()

    def encode(self, sentences, task: str = "sst") -> torch.Tensor:
        """(N, C) sentence vectors: the run's pooling (--pooling) of the encoder, with `task`'s PALs if it has them."""
        data = self.data(sentences, False, "encode")
        return self.in_order(data, lambda batch: self.model.features(task, batch)[0])

    def predict(self, inputs, tasks=None) -> list[dict]:
        """One record per input: single sentences get SST (sst_label, sst_name, sst_probabilities), pairs get the
        paraphrase probability (para_probability) and the STS score (sts_score); `tasks` runs only those heads."""
        rows = _rows(inputs)
        tasks = self.check_tasks(tasks, ("para", "sts") if rows and rows[0][1] is not None else ("sst",))
        records = [{"sentence": a} if b is None else {"sentence1": a, "sentence2": b} for a, b in rows]
        for task in tasks:
            if task == "sst":
                for r, s in zip(records, self.sentiment(rows)):
                    r.update(sst_label=s["label"], sst_name=s["name"], sst_probabilities=s["probabilities"])
            else:
                values = self.paraphrase(rows) if task == "para" else self.similarity(rows)
                for r, v in zip(records, values):
                    r["para_probability" if task == "para" else "sts_score"] = v
        return records

    def hf_head(self, task: str) -> dict:
        """The head of `task` as BertForSequenceClassification's classifier: weight (K, C), bias (K,), labels,
        problem_type. A UserError says why when the head has another shape."""
        self.check_tasks([task], ())
        why = None
        if self.args.pooling != "pooler":
            why = ("its heads read the mean of the token states (--pooling mean); BertForSequenceClassification "
                   "reads the pooler output: train with --pooling pooler (the default) for a pipeline folder, or "
                   "export this run's encoder with python -m minbert export-st (sentence-transformers)")
        elif self.model.pals is not None:
            why = "PALs (--pals) add task layers inside the encoder; BertForSequenceClassification has none"
        elif task != "sst" and self.model.pair_heads[task] != "cross":
            kind = self.model.pair_heads[task]
            why = (f"--{task}_head {kind} " + ("scales the score by tanh onto 0-5" if kind in CROSS_HEADS else
                                              "encodes the two sentences apart (a bi-encoder)")
                   + "; BertForSequenceClassification reads the pair as one sequence through one linear layer")
        elif self.args.head != "linear":
            why = "an MLP head (--head mlp); BertForSequenceClassification's classifier is one linear layer"
        if why:
            raise UserError(f"{self.folder}: the {task} head does not fit Hugging Face's "
                            f"BertForSequenceClassification: {why}")
        linear = self.model.heads[task][-1]   # Dropout -> Linear; R4F's weight is read spectrally normalised
        labels, problem = {"sst": (SST_LABELS, "single_label_classification"),
                           "para": (("paraphrase",), "multi_label_classification"),   # BCE: a sigmoid, as trained
                           "sts": (("similarity",), "regression")}[task]
        return {"weight": linear.weight.detach(), "bias": linear.bias.detach(), "labels": labels,
                "problem_type": problem}


class MMLRun(TrainedRun):
    """A train_mml.py run: one GLUE task, M heads on BERT's pooler output (one for --method bert)."""

    def __init__(self, folder, args, encoder, heads, tokenizer, device, amp, batch_size):
        super().__init__(folder, args, tokenizer, device, amp, batch_size)
        self.encoder, self.heads, self.task = encoder, heads, args.task
        self.tasks = (args.task,)
        self.labels = glue.TASKS[args.task].label_names   # () for STS-B's score

    def pooled(self, batch) -> torch.Tensor:
        return self.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]

    def classify(self, inputs) -> list[dict]:
        """Eq. 5 for each input (a pair, or a sentence for CoLA and SST-2): {"label", "name", "probabilities"};
        STS-B: {"score"}."""
        data = self.data(inputs, glue.is_pair_task(self.task), self.task)
        # (B, M, K) outputs of every head under --amp; Eq. 5 (heads.predict) in fp32, as train_mml.py scores them
        out = self.in_order(data, lambda batch: self.heads(self.pooled(batch)), after=self.heads.predict)
        if not self.labels:
            return [{"score": float(y)} for y in out]
        return [{"label": int(p.argmax()), "name": self.labels[int(p.argmax())], "probabilities": p.tolist()}
                for p in out]

    def encode(self, sentences) -> torch.Tensor:
        """(N, C): BERT's pooler output, the vector the heads read."""
        return self.in_order(self.data(sentences, False, "encode"), self.pooled)

    def predict(self, inputs, tasks=None) -> list[dict]:
        """One record per input: the sentence(s) and classify's answer."""
        self.check_tasks(tasks, self.tasks)
        rows = _rows(inputs)
        records = [{"sentence": a} if b is None else {"sentence1": a, "sentence2": b} for a, b in rows]
        return [r | answer for r, answer in zip(records, self.classify(rows))]

    def hf_head(self, task: str) -> dict:
        """Eq. 5 averages logits, and a mean of linear maps is one linear map:
        ŷ = (Σ β_j F_j / Σβ) d + Σ β_j b_j / Σβ, so the active heads' mean weight and bias are HF's classifier."""
        self.check_tasks([task], ())
        w = self.heads.active.float() / self.heads.active.sum()                         # (M,) β_j / Σβ
        return {"weight": torch.einsum("m,mkd->kd", w, self.heads.weight.detach().float()),   # (K, D)
                "bias": torch.einsum("m,mk->k", w, self.heads.bias.detach().float()),         # (K,)
                "labels": self.labels or ("score",),
                "problem_type": "regression" if not self.labels else "single_label_classification"}


# ---------------------------------------------------------------------------------------------- loading, checked
def _model_folder(path: Path) -> Path:
    """`path` (a run's --out_dir or its model/) -> the model folder, checked to hold every file (regular files)."""
    if not path.is_dir():
        raise UserError(f"{path}: no such folder; pass the --out_dir of a finished train_multitask.py or "
                        f"train_mml.py run (or its {MODEL_DIR}/ folder)")
    folder = path / MODEL_DIR if not (path / "config.json").is_file() and (path / MODEL_DIR).is_dir() else path
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        also = " (model.bin files are pickles, which can run code, and are never read here)" \
            if "model.safetensors" in missing and any(folder.glob("*.bin")) else ""
        raise UserError(f"{path}: not a finished run: {folder} lacks {', '.join(missing)}{also}. A run writes "
                        f"{MODEL_DIR}/ at its end; pass a train_multitask.py or train_mml.py --out_dir")
    return folder


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: not valid JSON ({e})") from None


def _read_tensors(path: Path) -> dict:
    from safetensors.torch import load_file
    try:
        return load_file(str(path))
    except Exception as e:   # safetensors raises its own error types for a damaged or foreign file
        raise UserError(f"{path}: not a readable safetensors file ({type(e).__name__}: {str(e)[:200]})") from None


def _encoder(folder: Path, fast_attention: bool) -> BertModel:
    """The encoder from model.safetensors only (from_pretrained would fall back on a pickled .bin)."""
    from safetensors import safe_open
    from minbert.bert.config import BertConfig
    config = BertConfig.from_json(folder / "config.json")
    with safe_open(str(folder / "model.safetensors"), "pt") as f:   # the header only: is the file that deep?
        stored = len(list(f.keys()))
    if config.num_hidden_layers > stored:
        raise UserError(f"{folder / 'config.json'}: {config.num_hidden_layers} layers, but model.safetensors holds "
                        f"only {stored} tensors")
    return BertModel.from_pretrained(folder / "model.safetensors", fast_attention=fast_attention)


class _Refusal(flags.BriefParser):
    def error(self, message):
        raise UserError(message)


def _flags(saved: dict, source: Path, keys: tuple, *modules) -> argparse.Namespace:
    """The run's flags `keys` as the scripts define them (each module's add_args and check_args; the others at their
    defaults): a value of the wrong type, out of range or not among the choices is refused, as the scripts would."""
    p = _Refusal(prog=str(source), add_help=False)
    for module in modules:
        module.add_args(p)
    p.add_argument("--max_seq_len", type=flags.between(5, 512, int), default=128)   # the scripts' own flag
    argv = []
    for action in p._actions:
        value = saved.get(action.dest) if action.dest in keys else None
        if value is None or not action.option_strings:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            if not isinstance(value, bool):
                raise UserError(f"{source}: {action.dest} is {value!r}; expected true or false")
            argv += [action.option_strings[0]] if value else []
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            argv += [f"{action.option_strings[0]}={value}"]
        else:
            raise UserError(f"{source}: {action.dest} is {value!r}; expected a number or a word")
    try:
        args = p.parse_args(argv)
        flags.check(args, p, *modules)
    except UserError as e:
        raise UserError(f"{source}: {e} (the flags stored with the run)") from None
    return args


def _load_strict(modules: dict, tensors: dict, source: Path) -> None:
    """Every tensor of `modules` (built on the meta device) from `tensors` by prefix.name, shapes equal, none extra."""
    wanted = {f"{prefix}.{k}": (m, k, v.shape) for prefix, m in modules.items() if m is not None
              for k, v in m.state_dict().items()}
    missing = sorted(set(wanted) - set(tensors))
    extra = sorted(set(tensors) - set(wanted))
    shapes = [f"{k} {tuple(tensors[k].shape)}, expected {tuple(wanted[k][2])}"
              for k in sorted(set(wanted) & set(tensors)) if tensors[k].shape != wanted[k][2]]
    problems = [f"missing {k}" for k in missing] + [f"unexpected {k}" for k in extra] + [f"shape of {s}" for s in shapes]
    if problems:
        more = f" and {len(problems) - 1} more" if len(problems) > 1 else ""
        raise UserError(f"{source}: does not fit the model its stage.json describes ({problems[0]}{more})")
    for prefix, module in modules.items():
        if module is not None:
            state = {k: tensors[f"{prefix}.{k}"] for k in module.state_dict()}
            module.load_state_dict(state, assign=True)


def _rows(inputs) -> list[tuple[str, str | None]]:
    """Sentences or (a, b) pairs -> (a, b or None) rows; an empty sentence or a mix of the two kinds is refused."""
    if isinstance(inputs, str):
        inputs = [inputs]
    rows = []
    for i, item in enumerate(inputs):
        row = (item, None) if isinstance(item, str) else tuple(item)
        if len(row) != 2 or not all(isinstance(t, str) for t in row if t is not None):
            raise UserError(f"input {i + 1}: expected a sentence or a pair of sentences, got {item!r}")
        if any(t is not None and not t.strip() for t in row):
            raise UserError(f"input {i + 1}: an empty sentence")
        if rows and (rows[0][1] is None) != (row[1] is None):
            raise UserError(f"input {i + 1} is {'a pair' if row[1] is not None else 'one sentence'}, input 1 is not: "
                            f"give single sentences or pairs, not both at once")
        rows.append((row[0].strip(), None if row[1] is None else row[1].strip()))
    return rows
