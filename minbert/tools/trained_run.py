"""A finished run, loaded for use: its model and heads on new sentences, in the order they were given.

`load_run(RUN_DIR)` builds the model that model/stage.json's "script" and "model_args" describe, loads its tensors
with `load_state_dict(strict=True)` in eval mode, and answers as `MultitaskRun` (sentiment, paraphrase, similarity)
or `MMLRun` (classify: Eq. 5 of Malkiel & Wolf); both encode(sentences) and predict(inputs), scored as the scripts
evaluate (minbert/tasks/scoring.py). A run folder is read as untrusted, so loading runs no code; anything wrong is
one UserError naming the file. The folder, the inputs and `hf_head`: docs/predict.md.
"""

import json
from pathlib import Path
from types import SimpleNamespace

import torch
from safetensors.torch import load_file
from torch import nn

from minbert.bert.config import BertConfig
from minbert.bert.model import BertModel
from minbert.bert.tokenizer import Tokenizer
from minbert.core.device import pick_device, resolve_amp
from minbert.core.errors import UserError
from minbert.core.export import MODEL_DIR, STAGE, TASK_MODULES
from minbert.methods import mml, r3f
from minbert.methods.pals import PALs
from minbert.run import run_dir
from minbert.tasks import glue, multitask
from minbert.tasks.data import Example
from minbert.tasks.sampling import TaskData
from minbert.tasks.multitask import CROSS_HEADS, SST_LABELS, TASKS, MultitaskBert
from minbert.tasks.scoring import EVAL_BATCH, in_order

FILES = ("config.json", "model.safetensors", "vocab.txt", TASK_MODULES, STAGE)   # what a run's model/ holds
SCRIPTS = ("train_multitask.py", "train_mml.py")
# The one rule for pairs, in Python and on the command line: a string that holds a tab (a TSV line) or "|||" (typed
# as "first ||| second") is a pair; a tuple (a, b) is a pair, (a, None) a sentence taken as it is.
PAIR_SEPARATORS = ("\t", "|||")


def model_args(script: str, args, hidden_size: int) -> dict:
    """What stage.json records as "model_args" for `script`'s model, from its flags `args`: exactly what
    load_run needs to build it again (the encoder's own config is config.json)."""
    if script == "train_multitask.py":
        return {"multitask": multitask.model_args(args), "max_seq_len": args.max_seq_len, "r4f": args.r4f,
                "pals": {"size": args.pals_size, "heads": args.pals_heads} if args.pals else None,
                "fast_attention": args.fast_attention}
    return {"task": args.task, "num_heads": mml.resolve_num_heads(args.method, hidden_size, args.heads),
            "max_seq_len": args.max_seq_len}


def load_run(path, device: str = "auto", amp: str = "auto", batch_size: int | None = None,
             progress: bool = False, script: str | None = None) -> "TrainedRun":
    """The run in `path` (its --out_dir, or that folder's model/ or best.pt) on `device` under `amp` (the scripts'
    flags), scoring `batch_size` inputs at a time (default EVAL_BATCH); `progress`: a bar (or log lines) while
    scoring; `script`: only a run of that script (its --predict_only). A folder that is no finished run: UserError."""
    folder = _model_folder(Path(path))
    try:
        stage = json.loads((folder / STAGE).read_text(encoding="utf-8"))
    except ValueError as e:   # a UnicodeDecodeError too
        raise UserError(f"{folder / STAGE}: not valid JSON ({e})") from None
    made_by, spec = (stage.get("script"), stage.get("model_args")) if isinstance(stage, dict) else (None, None)
    config = BertConfig.from_json(folder / "config.json")
    if spec is None:   # exported before stage.json held the record: the same record from the flags it stored
        made_by, spec = _older_record(folder, stage, config.hidden_size)
    if made_by not in SCRIPTS or not isinstance(spec, dict):
        raise UserError(f"{folder / STAGE}: no \"script\" ({' or '.join(SCRIPTS)}) and \"model_args\" record; it "
                        f"is not the model/ folder of a train_multitask.py or train_mml.py run")
    if script not in (None, made_by):
        raise UserError(f"{path}: a {made_by} run; {script} --predict_only reads its own runs (any run: "
                        f"python -m minbert predict {path})")
    try:
        tensors = load_file(str(folder / TASK_MODULES))
    except Exception as e:   # safetensors raises its own error types for a damaged or foreign file
        raise UserError(f"{folder / TASK_MODULES}: not a readable safetensors file ({type(e).__name__}: "
                        f"{str(e)[:200]})") from None
    encoder = _encoder(folder, config, spec.get("fast_attention") is True)
    length = spec.get("max_seq_len")
    if type(length) is not int or not 5 <= length <= encoder.config.max_position_embeddings:
        raise UserError(f"{folder / STAGE}: max_seq_len {length!r}; expected an integer from 5 to "
                        f"{encoder.config.max_position_embeddings} (the encoder's positions)")
    try:
        with torch.device("meta"):   # the heads' shapes, without memory, until the strict load checks them
            model, modules = _build(made_by, spec, encoder)
    except (TypeError, ValueError, KeyError, AttributeError) as e:
        raise UserError(f"{folder / STAGE}: its model_args describe no {made_by} model ({type(e).__name__}: "
                        f"{' '.join(str(e).split())[:200]})") from None
    try:
        nn.ModuleDict(modules).load_state_dict(tensors, strict=True, assign=True)
    except RuntimeError as e:
        raise UserError(f"{folder / TASK_MODULES}: does not fit the model its stage.json describes "
                        f"({' '.join(str(e).split())[:300]})") from None
    device = pick_device(device)
    amp, _ = resolve_amp(amp, device)
    setting = (folder, spec, Tokenizer.from_pretrained(folder), device, amp, batch_size or EVAL_BATCH, progress)
    if made_by == "train_multitask.py":
        return MultitaskRun(*setting, model=model.to(device).eval())
    return MMLRun(*setting, encoder=encoder.to(device).eval(), heads=modules["heads"].to(device).eval())


def _build(script: str, spec: dict, encoder: BertModel) -> tuple:
    """(model, {prefix: module} whose tensors task_modules.safetensors holds) as `script` built them, from the
    record `spec`: MultitaskBert with its PALs and R4F's normalised heads, or MML's heads (model None)."""
    if script == "train_multitask.py":
        pals = spec["pals"] and PALs(encoder.config, TASKS, spec["pals"]["size"], spec["pals"]["heads"])
        model = MultitaskBert(encoder, dropout=0.0, pals=pals, **spec["multitask"])
        if spec["r4f"]:   # R4F's heads are stored spectrally normalised (minbert/methods/r3f.py)
            r3f.spectral_norm_heads(model)
        return model, {"heads": model.heads} | ({"pals": model.pals} if pals else {})
    heads = mml.MultiverseHeads(encoder.config.hidden_size, glue.TASKS[spec["task"]].num_labels, spec["num_heads"])
    return None, {"heads": heads}


class TrainedRun:
    """What both kinds of run share: the tokenizer, the device, and batches put back in input order."""

    tasks: tuple = ()

    def __init__(self, folder, model_args, tokenizer, device, amp, batch_size, progress):
        self.folder, self.model_args, self.tokenizer = folder, model_args, tokenizer
        self.max_seq_len = model_args["max_seq_len"]   # the run's --max_seq_len: inputs are cut as it trained
        self.device, self.amp, self.batch_size, self.progress = device, amp, batch_size, progress

    def __repr__(self):
        return f"<{type(self).__name__} {self.folder}: tasks {', '.join(self.tasks)}>"

    def data(self, inputs, pair: bool, what: str, pair_mode: str = "cross") -> TaskData | None:
        """The inputs tokenized as the scripts do; None for no inputs. `pair`: what `what` reads."""
        rows = _rows(inputs)
        wrong = next((i for i, (_, b) in enumerate(rows) if (b is not None) != pair), None)
        if wrong is not None:
            raise UserError(f"{what} reads {'sentence pairs' if pair else 'one sentence each'}, but input "
                            f"{wrong + 1} is {'one sentence' if pair else 'a pair'}")
        if not rows:
            return None
        examples = [Example(str(i), a, b, None) for i, (a, b) in enumerate(rows)]
        return TaskData(examples, self.tokenizer, self.max_seq_len, pair_mode=pair_mode)

    def in_order(self, data: TaskData | None, forward, after=None) -> torch.Tensor:
        """forward(batch) under --amp on every batch, then after(outputs) in fp32; rows in input order."""
        if data is None:
            return torch.empty(0)
        return in_order({"predict": data}, lambda _, batch: forward(batch), self.device, self.amp, self.batch_size,
                        "predict" if self.progress else None, after)["predict"].outputs

    def check_tasks(self, tasks, default) -> tuple:
        tasks = tuple([tasks] if isinstance(tasks, str) else tasks or default)
        unknown = [t for t in tasks if t not in self.tasks]
        if unknown:
            raise UserError(f"unknown task {unknown[0]!r}: {self.folder} answers {', '.join(self.tasks)}")
        return tasks


class MultitaskRun(TrainedRun):
    """A train_multitask.py run: SST-5, Quora paraphrase and STS heads on one encoder."""

    tasks = TASKS

    def __init__(self, *setting, model):
        super().__init__(*setting)
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
        """One record per input, each answered as what it is (sentences and pairs may mix): a sentence gets SST
        (sst_label, sst_name, sst_probabilities), a pair the paraphrase probability (para_probability) and the STS
        score (sts_score); `tasks` runs only those heads, and an input none of them reads is refused."""
        rows = _rows(inputs)
        asked = self.check_tasks(tasks, TASKS) if tasks else None
        records = [{"sentence": a} if b is None else {"sentence1": a, "sentence2": b} for a, b in rows]
        for pair, default in ((False, ("sst",)), (True, ("para", "sts"))):
            kind = [i for i, (_, b) in enumerate(rows) if (b is not None) == pair]   # the inputs of this kind
            run = default if asked is None else tuple(t for t in asked if (t != "sst") == pair)
            if kind and not run:
                raise UserError(f"input {kind[0] + 1} is {'a pair' if pair else 'one sentence'}, but "
                                f"{','.join(asked)} {'reads' if len(asked) == 1 else 'read'} "
                                f"{'one sentence each' if pair else 'sentence pairs'}")
            chosen = [rows[i] for i in kind]
            for task in run if kind else ():
                if task == "sst":
                    answers = [{"sst_label": s["label"], "sst_name": s["name"], "sst_probabilities": s["probabilities"]}
                               for s in self.sentiment(chosen)]
                elif task == "para":
                    answers = [{"para_probability": v} for v in self.paraphrase(chosen)]
                else:
                    answers = [{"sts_score": v} for v in self.similarity(chosen)]
                for i, answer in zip(kind, answers):
                    records[i].update(answer)
        return records

    def hf_head(self, task: str) -> dict:
        """The head of `task` as BertForSequenceClassification's classifier: weight (K, C), bias (K,), labels,
        problem_type. A UserError says why when the head has another shape."""
        self.check_tasks([task], ())
        why = None
        if self.model.pooling != "pooler":
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
        elif self.model_args["multitask"]["head"] != "linear":
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

    def __init__(self, *setting, encoder, heads):
        super().__init__(*setting)
        self.encoder, self.heads, self.task = encoder, heads, self.model_args["task"]
        self.tasks = (self.task,)
        self.labels = glue.TASKS[self.task].label_names   # () for STS-B's score

    def pooled(self, batch) -> torch.Tensor:
        return self.encoder(batch["input_ids"], batch["attention_mask"], batch["token_type_ids"])["pooler_output"]

    def scores(self, data: TaskData | None) -> torch.Tensor:
        """Eq. 5 in input order: (N, K) probabilities, or (N,) STS-B scores. The (B, M, K) outputs of every head
        come under --amp; Eq. 5 (heads.predict) runs in fp32, as train_mml.py scores them."""
        return self.in_order(data, lambda batch: self.heads(self.pooled(batch)), after=self.heads.predict)

    def classify(self, inputs) -> list[dict]:
        """Eq. 5 for each input (a pair, or a sentence for CoLA and SST-2): {"label", "name", "probabilities"};
        STS-B: {"score"}."""
        out = self.scores(self.data(inputs, glue.is_pair_task(self.task), self.task))
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
    """`path` (a run's --out_dir, its model/, or a file in it such as best.pt) -> the model folder, checked to hold
    every file; a run still training, interrupted or failed says which, and how to go on."""
    path = path.parent if path.is_file() and path.suffix == ".pt" else path
    if not path.is_dir():
        raise UserError(f"{path}: no such folder; pass the --out_dir of a finished train_multitask.py or "
                        f"train_mml.py run (or its {MODEL_DIR}/ folder)")
    folder = path / MODEL_DIR if not (path / "config.json").is_file() and (path / MODEL_DIR).is_dir() else path
    missing = [name for name in FILES if not (folder / name).is_file()]
    if missing:
        unfinished = run_dir.unfinished(path.parent if path.name == MODEL_DIR else path)
        if unfinished:
            raise UserError(f"{path}: not a finished run: {unfinished}")
        also = " (model.bin files are pickles, which can run code, and are never read here)" \
            if "model.safetensors" in missing and any(folder.glob("*.bin")) else ""
        raise UserError(f"{path}: not a finished run: {folder} lacks {', '.join(missing)}{also}. A run writes "
                        f"{MODEL_DIR}/ at its end; pass a train_multitask.py or train_mml.py --out_dir")
    return folder


def _older_record(folder: Path, stage, hidden_size: int) -> tuple:
    """(script, model_args) of a model/ exported before stage.json held them: the script from its run folder's
    run.json, the record from the flags stage.json stored ("args")."""
    script = run_dir.read_marker(folder.parent).get("script") if folder.name == MODEL_DIR else None
    saved = stage.get("args") if isinstance(stage, dict) else None
    if script not in SCRIPTS or not isinstance(saved, dict):
        return None, None
    try:
        return script, json.loads(json.dumps(model_args(script, SimpleNamespace(**saved), hidden_size)))
    except (AttributeError, TypeError, ValueError) as e:
        raise UserError(f"{folder / STAGE}: its flags describe no {script} model ({e})") from None


def _encoder(folder: Path, config: BertConfig, fast_attention: bool) -> BertModel:
    """The encoder from model.safetensors only (from_pretrained would fall back on a pickled .bin)."""
    from safetensors import safe_open
    with safe_open(str(folder / "model.safetensors"), "pt") as f:   # the header only: is the file that deep?
        stored = len(list(f.keys()))
    if config.num_hidden_layers > stored:
        raise UserError(f"{folder / 'config.json'}: {config.num_hidden_layers} layers, but model.safetensors holds "
                        f"only {stored} tensors")
    return BertModel.from_pretrained(folder / "model.safetensors", fast_attention=fast_attention)


def split_pair(text: str) -> tuple[str, str | None]:
    """A string input -> (text, None), or (first, second) where it holds a separator (PAIR_SEPARATORS: the one rule
    for pairs). More than two parts: ValueError, saying how many."""
    sep = next((s for s in PAIR_SEPARATORS if s in text), None)
    parts = [text] if sep is None else text.split(sep)
    if len(parts) > 2:
        raise ValueError(f"{len(parts)} sentences; a pair is two, separated by a tab or ' ||| '")
    return parts[0], parts[1] if sep else None


def _rows(inputs) -> list[tuple[str, str | None]]:
    """Sentences, "a ||| b" strings or (a, b) pairs -> (a, b or None) rows, by the one rule for pairs (split_pair);
    an empty sentence is refused."""
    if isinstance(inputs, str):
        inputs = [inputs]
    rows = []
    for i, item in enumerate(inputs):
        try:
            row = split_pair(item) if isinstance(item, str) else tuple(item)
        except ValueError as e:
            raise UserError(f"input {i + 1}: {e}") from None
        if len(row) != 2 or not isinstance(row[0], str) or not isinstance(row[1], (str, type(None))):
            raise UserError(f"input {i + 1}: expected a sentence or a pair of sentences, got {item!r}")
        if any(t is not None and not t.strip() for t in row):
            raise UserError(f"input {i + 1}: an empty sentence")
        rows.append((row[0].strip(), None if row[1] is None else row[1].strip()))
    return rows
