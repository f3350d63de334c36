"""Grades recipes/*.args: every recipe parses and passes --dry_run at its entry point, and its key values are the
papers' (the values are written here from the papers, with the section in each message).

Run: python -m pytest -q tests/core/test_recipes.py   (offline, CPU, seconds; nothing is trained or loaded)
"""

import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.args"))


def entry_point(path):
    """The first line names it: '# python train_multitask.py @recipes/x.args' or '# python -m minbert simcse ...'."""
    words = path.read_text().splitlines()[0].split()
    assert words[:2] == ["#", "python"], f"{path.name}:1: the first line must say how to run it ('# python ENTRY @recipes/...')"
    return f"minbert {words[4]}" if words[2:4] == ["-m", "minbert"] else words[2]


def parse(entry):
    import train_mml
    import train_multitask
    from minbert.tools import simcse_stage
    from bench import mml_study
    from minbert.tools import ensemble
    return {"train_multitask.py": train_multitask.parse_args, "train_mml.py": train_mml.parse_args,
            "minbert simcse": simcse_stage.parse_args, "bench/mml_study.py": mml_study.parse_args,
            "minbert ensemble": ensemble.main}[entry]


def dry_run(path, capsys, *extra):
    entry = entry_point(path)
    with pytest.raises(SystemExit) as stop:
        parse(entry)([f"@{path}", "--dry_run", "json", *extra])
    out = capsys.readouterr().out
    assert stop.value.code in (0, None), f"{path.name}: --dry_run at {entry} exited with {stop.value.code}: {out[-500:]}"
    return json.loads(out)


def test_there_are_recipes():
    assert len(RECIPES) >= 25, f"recipes/: expected a recipe per paper configuration, found {len(RECIPES)}"


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_recipe_parses_and_passes_dry_run(path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    config = dry_run(path, capsys)
    from_recipe = [k for k, v in config["flags"].items() if v["source"] == "recipe"]
    assert len(from_recipe) >= 3, f"{path.name}: --dry_run attributes only {from_recipe} to the recipe"
    for line_no, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip().startswith("--"):
            assert "#" in line, f"{path.name}:{line_no}: every flag line cites the paper (or says 'paper silent'): {line!r}"


def test_command_line_overrides_a_recipe_and_sources_are_reported(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    config = dry_run(ROOT / "recipes" / "benton-ann-concat.args", capsys, "--seed", "5", "--lr", "2e-5")
    flags = config["flags"]
    assert flags["lr"] == {"value": 2e-5, "source": "command line"}, f"--lr after the recipe must win: {flags['lr']}"
    assert flags["seed"] == {"value": 5, "source": "command line"}, flags["seed"]
    assert flags["schedule"] == {"value": "annealed", "source": "recipe"}, flags["schedule"]
    assert flags["max_seq_len"]["source"] == "default", flags["max_seq_len"]


# ---------------------------------------------------------------------------- --dry_run's table
def table(parse_args, argv, capsys) -> dict:
    """--dry_run's table as {label: [texts]} (a row with no label continues the one above)."""
    with pytest.raises(SystemExit) as stop:
        parse_args(argv)
    out = capsys.readouterr().out.splitlines()
    assert stop.value.code == 0, f"{argv}: --dry_run exited {stop.value.code}"
    out = out[next(i for i, line in enumerate(out) if "  nothing written" in line):]   # after the readers' notes
    width = out[0].index("  nothing written")
    rows, label = {}, None
    for line in out:
        label = line[:width].strip() or label
        rows.setdefault(label, []).append(line[width:].strip())
    return rows


def test_dry_run_is_a_short_table_of_the_changes_the_model_the_data_and_the_steps(capsys, monkeypatch, tmp_path):
    """The recipe's bert-base-uncased is in no cache here (empty caches): the table says the run downloads it first.
    The rows are counted against the shipped files as the training script reads them (minbert.tasks.data), and
    the steps against the rule of --steps_per_epoch 0: one pass over all examples in batches of 32, 10 epochs."""
    import train_multitask
    from minbert.tasks import data
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf"))
    rows = table(train_multitask.parse_args, ["@recipes/benton-baseline.args", "--seed", "5", "--steps_per_epoch", "0",
                                              "--dry_run"], capsys)
    assert len(sum(rows.values(), [])) <= 12, f"--dry_run must be a short table, got {rows}"
    assert rows["model"] == [f"bert-base-uncased: NOT downloaded yet: the run downloads it first (about 440 MB) "
                             f"into {tmp_path / 'hf'}"], f"--dry_run must warn that the model is downloaded first: {rows}"
    changed = " ".join(rows["changed"])
    assert "--lr 1e-05 (recipe)" in changed and "--seed 5" in changed and "--seed 5 (recipe)" not in changed, changed
    assert "--max_seq_len" not in changed, f"a flag at its default is not a change: {changed}"
    sizes = {t: len(read(f"data/{name}")) for t, read, name in (("sst", data.read_sst, "ids-sst-train.csv"),
             ("para", data.read_quora, "quora-train-sample.csv"), ("sts", data.read_sts, "sts-train.csv"))}
    assert rows["train data"] == [f"sst {sizes['sst']:,}, para {sizes['para']:,}, sts {sizes['sts']:,} examples"], \
        f"--dry_run's training examples must be what minbert.tasks.data reads: {rows['train data']}"
    steps = -(-sum(sizes.values()) // 32)
    assert rows["steps"][0].startswith(f"{steps:,} per epoch x 10 epochs = {10 * steps:,} optimizer steps"), rows["steps"]


def test_dry_run_names_a_model_found_locally_and_json_stays_available(capsys, monkeypatch):
    import train_mml
    monkeypatch.chdir(ROOT)
    rows = table(train_mml.parse_args, ["--task", "RTE", "--model", "minilm-l6", "--dry_run"], capsys)
    assert rows["model"][0].startswith("minilm-l6 (") and "NOT" not in rows["model"][0], rows["model"]
    assert rows["data"] == ["RTE train 2,490, dev 277 examples"], rows["data"]
    with pytest.raises(SystemExit):
        train_mml.parse_args(["--task", "RTE", "--dry_run", "json"])
    assert json.loads(capsys.readouterr().out)["flags"]["task"] == {"value": "RTE", "source": "command line"}


def test_a_bare_dry_run_before_a_positional_leaves_it_a_positional(capsys, tmp_path):
    from minbert.core import flags
    parser = flags.ArgumentParser(prog="p")
    parser.add_argument("runs", nargs="+")
    args = parser.parse_args(["--dry_run", "runs/a", "runs/b"])
    assert (args.dry_run, args.runs) == ("table", ["runs/a", "runs/b"]), vars(args)


# ---------------------------------------------------------------------------- the papers' values
# recipe -> {flag: (the paper's value, where the paper says it)}
BENTON = {"lr": (1e-5, "Benton §5.3: learning rate 1e-5"), "epochs": (10, "Benton §5.3: 10 epochs"),
          "hidden_dropout_prob": (0.3, "Benton §5.3: dropout 0.3"), "batch_size": (32, "Benton §5.3: batch size 32"),
          "steps_per_epoch": (3000, "Benton §5.3: 3000 batches per epoch"), "para_head": ("cross", "Benton §4.1")}
ANN = {"schedule": ("annealed", "Benton §4.2 annealed sampling")}
EQUIT = {"schedule": ("proportional", "Benton §4.2 equitable sampling p_i ∝ N_i")}
CONCAT = {"sts_head": ("cross_tanh", "Benton §4.2 STS Concatenation (one pass, tanh)")}
COSIM = {"sts_head": ("cosine", "Benton §4.2 Cosine Similarity")}
MNR = {"mnr": (1.0, "Benton §4.2 MNR"), "mnr_score": ("dot", "Benton §4.2 dot-product scoring"),
       "mnr_schedule": ("first_half", "Benton §4.2: MNR for the first half of the epochs"),
       "mnr_batches": ("positives", "Benton §4.2: batches of K positive pairs")}
PRITSKY = {"lr": (1e-5, "Pritsky §4.3: fine-tuning lr 1e-5"), "epochs": (10, "Pritsky §4.4: 10 epochs")}
P128 = {"batch_size": (32, "Pritsky §4.3"), "grad_accum": (4, "Pritsky §4.3: effective batch 128")}
P32 = {"batch_size": (32, "Pritsky §4.3: gradient treatments at 32"), "grad_accum": (1, "Pritsky §4.3")}
CROSS = {"para_head": ("cross", "Pritsky Table 2 BaseModel: concat sentences"), "sts_head": ("cross", "Pritsky Table 2 BaseModel")}
HIDDEN = {"head": ("mlp", "Pritsky §4.4: one hidden layer"), "head_layers": (1, "Pritsky §4.4: one hidden layer of 768"),
          "head_activation": ("relu", "Pritsky §3.3.3: ReLU")}
INDIV = {"head_pretrain_epochs": (25, "Pritsky §4.4: pretrained for 25 epochs"),
         "head_pretrain_patience": (3, "Pritsky §4.4: patience of 3"), "head_pretrain_lr": (1e-3, "Pritsky §4.3: lr 1e-3")}
PAL_SCHEDULE = {"schedule": ("annealed", "Pritsky §3.2.1 Pal schedule")}
PALS132 = {"pals_size": (132, "Pritsky §4.4: 12 heads of dimension 11"), "pals_heads": (12, "Pritsky §4.4: 12 heads")}
MML = {"lr": (2e-5, "MML §4.1: learning rate 2e-5"), "batch_size": (32, "MML §4.1: batch size 32"),
       "eliminate_every": (1000, "MML Alg. 1: K = 1000"),
       "model": ("bert-large-uncased", "MML §4.1: the BERT-Large model, m = d = 1024 heads")}
EXPECTED = {
    "benton-baseline.args": {**BENTON, "steps_per_epoch": (567, "Benton §4.1: epoch = every example of the smallest set, 3 x 189"),
                             "schedule": ("round_robin", "Benton §4.1 round robin"), "sts_head": ("dot", "Benton §4.1 dot product"),
                             "head": ("linear", "Benton §4.1 a single linear layer")},
    "benton-ann-concat.args": {**BENTON, **ANN, **CONCAT},
    "benton-ann-cosim.args": {**BENTON, **ANN, **COSIM},
    "benton-ann-cosim-mnr.args": {**BENTON, **ANN, **COSIM, **MNR},
    "benton-equit-concat.args": {**BENTON, **EQUIT, **CONCAT},
    "benton-equit-cosim.args": {**BENTON, **EQUIT, **COSIM},
    "benton-equit-cosim-mnr.args": {**BENTON, **EQUIT, **COSIM, **MNR},
    "pritsky-concat-embed.args": {**PRITSKY, **P128, "para_head": ("concat", "Pritsky Table 2 concat embed."),
                                  "schedule": ("uniform", "Pritsky §3.1 random task scheduler")},
    "pritsky-concat-embed-pal.args": {**PRITSKY, **P128, **PAL_SCHEDULE, "sts_head": ("concat", "Pritsky Table 2 concat embed.")},
    "pritsky-basemodel.args": {**PRITSKY, **P128, **CROSS, "schedule": ("uniform", "Pritsky §3.1 random task scheduler")},
    "pritsky-basemodel-pal.args": {**PRITSKY, **P128, **CROSS, **PAL_SCHEDULE},
    "pritsky-basemodel-pal-hidden.args": {**PRITSKY, **P128, **CROSS, **PAL_SCHEDULE, **HIDDEN},
    "pritsky-advanced.args": {**PRITSKY, **P128, **CROSS, **PAL_SCHEDULE, **HIDDEN, **INDIV},
    "pritsky-advanced-pal.args": {**PRITSKY, **P128, **CROSS, **PAL_SCHEDULE, **HIDDEN, **INDIV, **PALS132,
                                  "pals": (True, "Pritsky Table 2: AdvancedModel + PAL")},
    "pritsky-pcgrad.args": {**PRITSKY, **P32, **CROSS, **HIDDEN, "surgery": ("pcgrad", "Pritsky Table 2 PCGrad")},
    "pritsky-vaccine.args": {**PRITSKY, **P32, **CROSS, **HIDDEN, "surgery": ("gradvac", "Pritsky Table 2 Vaccine")},
    "pritsky-vaccine-smart.args": {**PRITSKY, **P32, **CROSS, **HIDDEN, "surgery": ("gradvac", "Pritsky Table 2 Vaccine"),
                                   "smart": (1.0, "Pritsky Table 2 + SMART")},
    "pritsky-grad-compromise.args": {**PRITSKY, **P32, **CROSS, **HIDDEN},
    "pritsky-best.args": {**P128, **PALS132, **HIDDEN, **PAL_SCHEDULE,
                          "pals_after": ("runs/pritsky-advanced", "Pritsky §4.4: PALs added to the fine-tuned AdvancedModel")},
    "song-simcse.args": {"lr": (1e-5, "Song/Hu/Pan §4.3: SimCSE lr 1e-5"), "epochs": (3, "Song/Hu/Pan §5: 3 epochs of wiki1m"),
                         "attention_dropout": (0.1, "Song/Hu/Pan §4.3: attention dropout 0.1 or 0.3"),
                         "weight_decay": (0.01, "Song/Hu/Pan §4.3: weight decay 0.01, 0.05 or 0.1"),
                         "data": ("data/wiki1m_for_simcse.txt", "Song/Hu/Pan §4.3/§4.4: 1M wiki sentences, not the CS224N ones")},
    "song-best.args": {"lr": (1e-5, "Song/Hu/Pan §4.3: lr 1e-5"), "epochs": (10, "Song/Hu/Pan §4.3: 10 epochs"),
                       "pals": (True, "Song/Hu/Pan Table 2 best: + PALs"), "pals_size": (204, "Song/Hu/Pan §4.3: d_s = 204"),
                       "pals_heads": (12, "Song/Hu/Pan §4.3: 12 heads"), "smart": (1.0, "Song/Hu/Pan §4.3: λ_s = 1"),
                       "smart_sigma": (1e-5, "Song/Hu/Pan §4.3: strong σ = 1e-5"), "smart_mu": (2.0, "Song/Hu/Pan §4.3: strong μ = 2"),
                       "smart_epsilon": (1e-5, "Song/Hu/Pan Fig. 1: strong ε = 1e-5"), "smart_steps": (1, "Song/Hu/Pan §4.3: T = 1"),
                       "extra_sst_pass": (True, "Song/Hu/Pan §4.3: an SST run at the end of each epoch"),
                       "head": ("mlp", "Song/Hu/Pan §3.1: feed-forward heads"), "head_layers": (2, "Song/Hu/Pan §3.1: two layers"),
                       "head_activation": ("gelu", "Song/Hu/Pan §3.1: GELU"),
                       "para_head": ("concat", "Song/Hu/Pan §3.1: the two sentences' embeddings concatenated"),
                       "sts_head": ("concat", "Song/Hu/Pan §3.1: the two sentences' embeddings concatenated"),
                       "model": ("runs/song-simcse/model", "Song/Hu/Pan Table 2: on SimCSE embeddings")},
    "mml-table1.args": {**MML, "tasks": (["MNLI", "QQP", "QNLI", "SST-2", "CoLA", "STS-B", "MRPC", "RTE"], "MML Table 1 columns"),
                        "methods": (["bert", "bert-drop", "mv5", "mv1024", "ensemble1024", "mml"], "MML Table 1 rows")},
    "mml-tables2-4-nli.args": {**MML, "tasks": (["MNLI", "QNLI", "RTE", "SNLI"], "MML Tables 2/4 datasets")},
    "mml-tables3-5-similarity.args": {**MML, "tasks": (["QQP", "MRPC", "STS-B*"], "MML Tables 3/5 datasets")},
    "muppet-prefinetune.args": {"heterogeneous": (True, "Muppet §5.2: heterogeneous batches"),
                                "heterogeneous_mix": ("natural", "Muppet §3.4: natural distribution"),
                                "schedule": ("proportional", "Muppet §3.4: no re-sampling"),
                                "scale_losses": (True, "Muppet §3.3: loss scaling")},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_recipe_values_are_the_papers(name, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    path = ROOT / "recipes" / name
    assert path.is_file(), f"recipes/{name} is missing"
    entry = entry_point(path)
    if entry == "bench/mml_study.py":   # its parse_args turns comma lists into lists: compare those
        from bench import mml_study
        args = vars(mml_study.parse_args([f"@{path}"]))
    else:
        args = {k: v["value"] for k, v in dry_run(path, capsys)["flags"].items()}
    for flag, (value, where) in EXPECTED[name].items():
        got = args[flag]
        ok = got == pytest.approx(value) if isinstance(value, float) else got == value
        assert ok, f"recipes/{name}: --{flag} is {got!r}, the paper's value is {value!r} ({where})"


def test_every_paper_configuration_has_a_recipe():
    names = {p.name for p in RECIPES} | {p.name for p in (ROOT / "recipes").glob("*.sh")}
    for needed in ("song-best.sh", "song-ensemble.sh", "pritsky-best.sh", "benton-best.sh", "muppet.sh", *EXPECTED):
        assert needed in names, f"recipes/{needed} is missing (recipes/README.md: a recipe for every headline configuration)"
