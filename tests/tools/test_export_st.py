"""Grades `python -m minbert export-st` (minbert/tools/export_st.py): a mean-pooled run as a sentence-transformers
folder.

Oracle: (b) live. sentence-transformers is not installed (and no dependency), so the folder is loaded the way
`SentenceTransformer(folder)` loads it: modules.json says Transformer at the folder's root, then Pooling from
1_Pooling/; the Transformer is `transformers`' AutoModel and AutoTokenizer on the root (inputs cut at
sentence_bert_config.json's max_seq_length), the Pooling is the mean of the token states over the attention mask
as 1_Pooling/config.json asks. Its vectors must equal `minbert.load_run(run).encode` to 1e-5. Properties: a run
whose sentence vector is the pooler output, or that has PALs, is refused in one line naming the flag, writing
nothing; an OUT_DIR with files is kept without --overwrite.
"""

import json

import pytest
import torch

import minbert
from minbert.core.errors import UserError
from minbert.tools import export_st
from test_export_hf import out_dir_kept_without_overwrite, run_folder
from test_trained_run import runs  # noqa: F401  (fixture: three finished tiny runs)

SENTENCES = ["good movie", "bad plot and dull actor", "a fun story with a great actor and a nice plot " * 20]


def sentence_transformer_encode(folder, sentences) -> torch.Tensor:
    """What SentenceTransformer(folder).encode(sentences) computes, from the folder's own files."""
    transformers = pytest.importorskip("transformers")
    modules = json.loads((folder / "modules.json").read_text())
    assert [(m["path"], m["type"]) for m in modules] == [
        ("", "sentence_transformers.models.Transformer"), ("1_Pooling", "sentence_transformers.models.Pooling")], \
        f"modules.json must list the Transformer at the root, then Pooling in 1_Pooling/: {modules}"
    pooling = json.loads((folder / "1_Pooling" / "config.json").read_text())
    assert pooling["pooling_mode_mean_tokens"] and not any(v for k, v in pooling.items() if k.startswith(
        "pooling_mode_") and k != "pooling_mode_mean_tokens"), f"1_Pooling/config.json must be mean only: {pooling}"
    max_len = json.loads((folder / "sentence_bert_config.json").read_text())["max_seq_length"]
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(folder))
    model = transformers.AutoModel.from_pretrained(str(folder)).eval()
    batch = tokenizer(sentences, padding=True, truncation=True, max_length=max_len, return_tensors="pt")
    with torch.no_grad():
        states = model(**batch).last_hidden_state                       # (B, T, C)
    keep = batch["attention_mask"].unsqueeze(-1).float()                # (B, T, 1)
    return (states * keep).sum(1) / keep.sum(1).clamp(min=1e-9)         # sentence-transformers' mean pooling


def test_the_sentence_transformers_folder_encodes_as_load_run_does(runs, tmp_path):
    export_st.main([str(runs.bi), str(tmp_path / "st")])
    run = minbert.load_run(runs.bi, device="cpu", amp="off")
    cut = json.loads((tmp_path / "st" / "sentence_bert_config.json").read_text())["max_seq_length"]
    assert cut == run.max_seq_len, f"export-st: sentence_bert_config.json cuts at {cut}, the run at " \
                                        f"{run.max_seq_len} (--max_seq_len)"
    ours = run.encode(SENTENCES)
    theirs = sentence_transformer_encode(tmp_path / "st", SENTENCES)
    assert theirs.shape == ours.shape, f"export-st: {tuple(theirs.shape)} vectors, load_run.encode {tuple(ours.shape)}"
    assert torch.allclose(theirs, ours, atol=1e-5), \
        f"export-st: the folder's mean-pooled vectors differ from load_run.encode by {(theirs - ours).abs().max():.2e}"


@pytest.mark.parametrize("kind, argv, why", [
    ("pooler", [], "--pooling pooler"),
    ("pals", ["--pooling", "mean", "--pals", "--pals_size", "8", "--pals_heads", "2"], "PALs (--pals)"),
    ("mml", [], "--pooling pooler"),
])
def test_a_run_without_a_mean_pooled_encoder_is_refused_in_one_line(runs, tmp_path, kind, argv, why):
    folder = {"pooler": runs.pooler, "mml": runs.mml}.get(kind) or run_folder(tmp_path, *argv)
    with pytest.raises(UserError) as e:
        export_st.main([str(folder), str(tmp_path / "out")])
    assert why in str(e.value) and "\n" not in str(e.value), f"expected one line naming {why!r}: {e.value}"
    assert not (tmp_path / "out").exists(), "a refused export must write nothing"


def test_an_out_dir_with_files_is_not_replaced_without_overwrite(runs, tmp_path):
    out_dir_kept_without_overwrite(export_st.main, runs.bi, tmp_path, "modules.json", "sentence_transformers.models.Pooling")


def test_dry_run_makes_the_exports_checks_and_names_every_file_it_would_write(runs, tmp_path, capsys):
    """export-st --dry_run once said only "no model loaded, nothing written". It now refuses what the export refuses,
    and on an exportable run names OUT_DIR and each file that the real export then writes (oracle: that export)."""
    with pytest.raises(UserError, match="--pooling pooler"):
        export_st.main([str(runs.pooler), str(tmp_path / "out"), "--dry_run"])
    capsys.readouterr()
    with pytest.raises(SystemExit) as e:
        export_st.main([str(runs.bi), str(tmp_path / "out"), "--dry_run"])
    out = capsys.readouterr().out
    said = [line for line in out.splitlines() if line.startswith("would write")]
    assert "no model loaded" not in out, f"export-st --dry_run reads the run for its checks; it said {out!r}"
    assert e.value.code == 0 and not (tmp_path / "out").exists(), "export-st --dry_run: exit 0, nothing written"
    export_st.main([str(runs.bi), str(tmp_path / "out")])
    files = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert len(said) == 1 and str(tmp_path / "out") in said[0] and all(f in said[0] for f in files), \
        f"minbert.tools.export_st: --dry_run must say it would write {files} into {tmp_path / 'out'}, said {said}"
