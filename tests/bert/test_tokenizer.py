"""
Tests for minbert/bert/tokenizer.py.

Oracle (b), live: Hugging Face's BertTokenizerFast loaded from the same MiniLM directory must give
identical input ids, token type ids and attention masks. The sentences are real CS224N dev data
(SST singles, STS pairs) from $MINBERT_DATA/cs224n or the shipped data/, plus hand-made edge cases.
Oracle (c), properties: padding layout, dtypes, the lowercase rule, longest-first truncation.

transformers is imported inside the `hf` fixture only: the import takes seconds.
"""

import csv
import json
from pathlib import Path

import pytest
import torch

from minbert.bert.tokenizer import Tokenizer
from minbert.core.hub import resolve

from conftest import real_cs224n_dir

DATA = real_cs224n_dir("ids-sst-dev.csv", "sts-dev.csv") or Path("no-cs224n-data")   # $MINBERT_DATA, else the shipped data/
N_REAL = 300  # real sentences (and pairs) taken from each dev file

EDGE_CASES = [
    "Hello, world!",
    "Café naïve résumé, Ångström and façade.",  # accents: stripped because MiniLM is uncased
    "我爱北京天安门 and 東京",  # Chinese characters are split one per token
    "Wait... what?! (Really?) -- yes; no: maybe.",
    "don't can't it's 3.14159 $100 50%",
    "\ttabs\tand\nnewlines  and   spaces ",
    "control\x00chars\x07 and \u200b zero width",
    "emoji 🤗 and symbols © ™ ∑",
    "a" * 150 + " word",  # a word over 100 characters becomes [UNK]
    "b" * 100 + " word",  # 100 characters: still split into pieces
    "c" * 101 + " word",  # 101 characters: [UNK]
    "[MASK] is kept whole, [CLS] too",
    "",
    "   ",
    ".",
    "long " * 600,  # over 512 tokens: truncated
]


def _read_tsv(name: str, columns: list[str]) -> list[tuple[str, ...]]:
    """First N_REAL rows of a CS224N tab-separated file, or [] when the data is not here."""
    if not (DATA / name).is_file():
        return []
    with open(DATA / name, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))[:N_REAL]
    return [tuple(row[c] for c in columns) for row in rows]


SINGLES = [s for (s,) in _read_tsv("ids-sst-dev.csv", ["sentence"])] + EDGE_CASES
PAIRS = _read_tsv("sts-dev.csv", ["sentence1", "sentence2"]) + list(zip(EDGE_CASES, reversed(EDGE_CASES)))


@pytest.fixture(scope="module")
def minilm_dir() -> Path:
    return resolve("minilm-l6")


@pytest.fixture(scope="module")
def ours() -> Tokenizer:
    return Tokenizer.from_pretrained("minilm-l6")


@pytest.fixture(scope="module")
def hf(minilm_dir):
    from transformers import BertTokenizerFast  # slow import, only for the tests that compare

    # from_pretrained(dir), not BertTokenizerFast(vocab_file=...): transformers 5 ignores vocab_file
    return BertTokenizerFast.from_pretrained(str(minilm_dir))


def _first_difference(fn: str, what: str, got: list, expected: list, inputs: list) -> None:
    """Fail at the first example whose row differs, naming the function to fix and showing where."""
    assert len(got) == len(expected), f"{fn}: {what}: expected {len(expected)} rows, got {len(got)}"
    for i, (g, e) in enumerate(zip(got, expected)):
        g, e = list(g), list(e)
        if g != e:
            j = next((k for k, (a, b) in enumerate(zip(g, e)) if a != b), min(len(g), len(e)))
            window = slice(max(0, j - 3), j + 5)  # a few ids either side of the first difference
            pytest.fail(f"{fn}: {what} differ from HF BertTokenizerFast at example {i}, "
                        f"input {str(inputs[i])[:200]!r}:\n"
                        f"  lengths: expected {len(e)}, got {len(g)}; first difference at position {j}\n"
                        f"  expected [{window.start}:{window.stop}] {e[window]}\n"
                        f"  got      [{window.start}:{window.stop}] {g[window]}")


# ---------------------------------------------------------------------------------------------
# Parity with HF BertTokenizerFast


def test_minilm_tokenizer_is_found_through_hub_resolve(minilm_dir, ours):
    """Property: the alias resolves to a directory with vocab.txt; MiniLM's specials are BERT's."""
    assert (minilm_dir / "vocab.txt").is_file(), f"minbert.core.hub.resolve('minilm-l6'): no vocab.txt in {minilm_dir}"
    got = (ours.vocab_size, ours.pad_id, ours.cls_id, ours.sep_id)
    assert got == (30522, 0, 101, 102), \
        f"minbert.bert.tokenizer.Tokenizer.__init__: expected (vocab_size, pad, cls, sep) = (30522, 0, 101, 102), got {got}"


@pytest.mark.parametrize("max_length", [512, 16])
@pytest.mark.parametrize("kind", ["singles", "pairs"])
def test_encode_and_pad_match_hf_bert_tokenizer_fast(ours, hf, kind, max_length):
    """Oracle (b): ids, token type ids and attention mask equal HF's, unpadded and padded,
    including truncation (longest-first for pairs) at max_length 16."""
    texts = SINGLES if kind == "singles" else [a for a, _ in PAIRS]
    pairs = None if kind == "singles" else [b for _, b in PAIRS]
    inputs = texts if pairs is None else list(zip(texts, pairs))

    ids, type_ids = ours.encode(texts, pairs, max_length=max_length)
    expected = hf(texts, pairs, truncation=True, max_length=max_length)
    _first_difference("minbert.bert.tokenizer.Tokenizer.encode", "input ids", ids, expected["input_ids"], inputs)
    _first_difference("minbert.bert.tokenizer.Tokenizer.encode", "token type ids", type_ids,
                      expected["token_type_ids"], inputs)

    got = ours(texts, pairs, max_length=max_length)
    expected = hf(texts, pairs, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    for key in ("input_ids", "attention_mask", "token_type_ids"):
        fn = "minbert.bert.tokenizer.Tokenizer.pad"
        assert got[key].dtype == torch.long, f"{fn}: {key} should be torch.long, got {got[key].dtype}"
        assert got[key].shape == expected[key].shape, \
            f"{fn}: {key} expected (B, T) = {tuple(expected[key].shape)}, got {tuple(got[key].shape)}"
        _first_difference(fn, key, got[key].tolist(), expected[key].tolist(), inputs)


def test_cased_tokenizer_matches_hf_without_lowercasing(tmp_path, minilm_dir):
    """Oracle (b): with do_lower_case false, neither we nor HF lowercase or strip accents."""
    from transformers import BertTokenizerFast

    (tmp_path / "vocab.txt").write_bytes((minilm_dir / "vocab.txt").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False}))
    hf_cased = BertTokenizerFast.from_pretrained(str(tmp_path))
    ours = Tokenizer(tmp_path / "vocab.txt", lowercase=False)
    texts = SINGLES[:50] + EDGE_CASES
    _first_difference("minbert.bert.tokenizer.Tokenizer.__init__ (lowercase=False)", "input ids",
                      ours.encode(texts, max_length=512)[0],
                      hf_cased(texts, truncation=True, max_length=512)["input_ids"], texts)


# ---------------------------------------------------------------------------------------------
# Properties


def test_pairs_truncate_longest_first_to_max_length(ours):
    """Property: a pair over max_length loses tokens from the longer sentence only, and the
    [CLS] a [SEP] b [SEP] layout keeps type ids 0 for a and 1 for b."""
    short, long = "a cat", "the dog ran " * 20  # "a cat" is 2 tokens, the other 60
    ids, type_ids = ours.encode([long], [short], max_length=16)
    fn = "minbert.bert.tokenizer.Tokenizer.encode"
    assert len(ids[0]) == 16, f"{fn}: expected 16 ids after truncation, got {len(ids[0])}: {ids[0]}"
    # [CLS] + 11 tokens of `long` + [SEP] + 2 tokens of `short` + [SEP] = 16
    assert type_ids[0] == [0] * 13 + [1] * 3, f"{fn}: expected type ids 0 x13 then 1 x3, got {type_ids[0]}"
    assert ids[0][-4:] == [ours.sep_id, *ours.encode([short])[0][0][1:-1], ours.sep_id], \
        f"{fn}: the short sentence should survive whole after [SEP], got {ids[0]}"


def test_pad_gives_right_padded_long_tensors(ours):
    """Property: pad fills to the longest row with pad_id, mask 1 on real tokens, type ids kept."""
    batch = ours.pad([[101, 7, 8, 102], [101, 102]], [[0, 0, 1, 1], [0, 0]])
    expected = {
        "input_ids": torch.tensor([[101, 7, 8, 102], [101, 102, 0, 0]]),
        "attention_mask": torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]]),
        "token_type_ids": torch.tensor([[0, 0, 1, 1], [0, 0, 0, 0]]),
    }
    assert set(batch) == set(expected), f"minbert.bert.tokenizer.Tokenizer.pad: keys {sorted(batch)}"
    for key, want in expected.items():
        assert batch[key].dtype == torch.long, f"minbert.bert.tokenizer.Tokenizer.pad: {key} dtype {batch[key].dtype}"
        assert torch.equal(batch[key], want), \
            f"minbert.bert.tokenizer.Tokenizer.pad: {key} (B, T) expected\n{want}\ngot\n{batch[key]}"


def test_call_accepts_a_single_string_and_pair(ours):
    """Property: a str is a batch of one; a str pair gives type ids 1 on the second sentence."""
    batch = ours("Hello world", "Bye")
    expected = torch.tensor([[101, 7592, 2088, 102, 9061, 102]])  # [CLS] hello world [SEP] bye [SEP]
    assert torch.equal(batch["input_ids"], expected), \
        f"minbert.bert.tokenizer.Tokenizer.__call__: expected {expected.tolist()}, got {batch['input_ids'].tolist()}"
    assert batch["token_type_ids"].tolist() == [[0, 0, 0, 0, 1, 1]], \
        f"minbert.bert.tokenizer.Tokenizer.__call__: token type ids {batch['token_type_ids'].tolist()}"


def test_call_rejects_return_tensors_other_than_pt(ours):
    with pytest.raises(ValueError, match="return_tensors='pt'"):
        ours(["hi"], return_tensors="np")


def test_encode_rejects_texts_and_pairs_of_different_lengths(ours):
    with pytest.raises(ValueError, match="2 texts but 1 pairs"):
        ours.encode(["a", "b"], ["c"])


def test_decode_inverts_encode_up_to_normalisation(ours):
    text = ours.decode(ours.encode(["Héllo, World! unaffable"])[0][0])
    assert text == "hello, world! unaffable", f"minbert.bert.tokenizer.Tokenizer.decode: got {text!r}"


def _fake_checkpoint(directory: Path, tokenizer_config: dict | None) -> Path:
    """config.json + empty weights (hub.resolve only checks they exist) + a tiny cased vocab."""
    directory.mkdir(parents=True)
    (directory / "config.json").write_text("{}")
    (directory / "model.safetensors").write_bytes(b"")
    (directory / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]",
                                                    "hello", "Hello", "cafe", "Café"]) + "\n")
    if tokenizer_config is not None:
        (directory / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return directory


@pytest.mark.parametrize("dirname, tokenizer_config, lowercase", [
    ("model", {"do_lower_case": False}, False),
    ("bert-base-cased", {"do_lower_case": True}, True),  # the config wins over the name
    ("bert-base-cased", None, False),
    ("bert-base-uncased", None, True),
    ("model", None, True),
])
def test_lowercase_rule_from_tokenizer_config_then_name(tmp_path, dirname, tokenizer_config, lowercase):
    """Property: do_lower_case from tokenizer_config.json if present, else lowercase unless the
    name says "cased" (and not "uncased"). Also loads through a weights-file path."""
    directory = _fake_checkpoint(tmp_path / dirname, tokenizer_config)
    for name_or_path in (directory, directory / "model.safetensors"):
        tok = Tokenizer.from_pretrained(name_or_path)
        ids = tok.encode(["Hello Café"])[0][0]
        expected = [2, 5, 7, 3] if lowercase else [2, 6, 8, 3]  # hello cafe vs Hello Café
        assert tok.lowercase == lowercase and ids == expected, \
            (f"minbert.bert.tokenizer.Tokenizer.from_pretrained({name_or_path}): expected lowercase={lowercase} "
             f"and ids {expected}, got lowercase={tok.lowercase} and ids {ids}")


# ---------------------------------------------------------------------------------------------
# Defaults, refusals, saving (written for mutation survivors: bench/mutation.py)


def test_default_max_length_is_bert_s_512_positions(ours, hf):
    """Oracle (b): HF truncates to the checkpoint's model_max_length, 512 (BERT's position table)."""
    text = "long " * 600
    want = hf([text], truncation=True)["input_ids"]
    assert len(want[0]) == 512, f"HF BertTokenizerFast truncated to {len(want[0])}, expected 512"
    assert ours.encode([text])[0] == want, \
        f"minbert.bert.tokenizer.Tokenizer.encode: by default {len(ours.encode([text])[0][0])} ids, expected 512 as HF"
    got = ours(text)["input_ids"]
    assert got.shape == (1, 512), f"minbert.bert.tokenizer.Tokenizer.__call__: by default (B, T) = {tuple(got.shape)}, expected (1, 512)"


def test_a_bare_vocab_file_is_read_uncased_like_hf(minilm_dir, hf):
    """Oracle (b): BertTokenizerFast's do_lower_case defaults to True, and so does Tokenizer(vocab_file)."""
    texts = SINGLES[:50] + EDGE_CASES
    _first_difference("minbert.bert.tokenizer.Tokenizer.__init__ (default lowercase)", "input ids",
                      Tokenizer(minilm_dir / "vocab.txt").encode(texts)[0], hf(texts, truncation=True)["input_ids"], texts)


def test_a_vocab_without_a_special_token_is_refused_by_name(tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "hello"]) + "\n")   # no [MASK]
    with pytest.raises(ValueError) as e:
        Tokenizer(vocab)
    assert str(vocab) in str(e.value) and "[MASK]" in str(e.value), \
        f"minbert.bert.tokenizer.Tokenizer.__init__: the error must name the file and '[MASK]', got {e.value}"


def test_a_checkpoint_without_vocab_txt_is_refused_with_its_folder(tmp_path):
    directory = _fake_checkpoint(tmp_path / "model", None)
    (directory / "vocab.txt").unlink()
    with pytest.raises(FileNotFoundError) as e:
        Tokenizer.from_pretrained(directory)
    assert str(directory) in str(e.value) and "vocab.txt" in str(e.value), \
        f"minbert.bert.tokenizer.Tokenizer.from_pretrained: the error must name {directory} and vocab.txt, got {e.value}"


def test_lowercase_rule_reads_a_local_folder_s_own_name_and_a_hub_name_as_given(tmp_path, monkeypatch):
    """A local path is judged by its last folder only (a parent called *-cased says nothing), and a hub
    name by the name asked for, not by the cache's snapshot folder (a commit hash) it resolves to."""
    local = _fake_checkpoint(tmp_path / "bert-base-cased-runs" / "model", None)
    assert Tokenizer.from_pretrained(local).lowercase is True, \
        f"minbert.bert.tokenizer.Tokenizer.from_pretrained({local}): a folder named 'model' is uncased, whatever its parent"
    cache = tmp_path / "hub"
    for name in ("bert-base-cased", "bert-base-uncased"):
        repo = cache / f"models--{name}"
        _fake_checkpoint(repo / "snapshots" / "0123abcd", None)
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text("0123abcd")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    for name, lowercase in (("bert-base-cased", False), ("bert-base-uncased", True)):
        got = Tokenizer.from_pretrained(name).lowercase
        assert got is lowercase, (f"minbert.bert.tokenizer.Tokenizer.from_pretrained({name!r}) from the HF cache: "
                                  f"lowercase={got}, expected {lowercase} (judge the name asked for)")


def test_pad_of_an_empty_batch_is_B0_T0():
    tok = Tokenizer(resolve("minilm-l6") / "vocab.txt")
    batch = tok.pad([], [])
    for key, t in batch.items():
        assert t.shape == (0, 0) and t.dtype == torch.long, \
            f"minbert.bert.tokenizer.Tokenizer.pad([], []): {key} is {tuple(t.shape)} {t.dtype}, expected (0, 0) long"


@pytest.mark.parametrize("lowercase", [True, False], ids=["uncased", "cased"])
def test_save_pretrained_writes_a_folder_hf_and_we_read_alike(tmp_path, minilm_dir, hf, lowercase):
    """Oracle (b): HF BertTokenizerFast loaded from the saved folder gives our ids; the tokenizer_config.json
    keys are ones HF writes, with HF's values (HF's own save of MiniLM's tokenizer, do_lower_case aside);
    vocab.txt is a byte copy. Saved into a folder that does not exist yet, then again over it."""
    from transformers import BertTokenizerFast
    ours = Tokenizer(minilm_dir / "vocab.txt", lowercase=lowercase)
    folder = tmp_path / "run" / "model"
    ours.save_pretrained(folder)
    ours.save_pretrained(folder)   # a second save over the first is fine
    fn = "minbert.bert.tokenizer.Tokenizer.save_pretrained"
    assert (folder / "vocab.txt").read_bytes() == (minilm_dir / "vocab.txt").read_bytes(), f"{fn}: vocab.txt is not a byte copy"
    written = json.loads((folder / "tokenizer_config.json").read_text())
    hf.save_pretrained(tmp_path / "hf")
    theirs = json.loads((tmp_path / "hf" / "tokenizer_config.json").read_text())
    wrong = {k: (v, theirs.get(k, "(no such key)")) for k, v in written.items() if k != "do_lower_case" and theirs.get(k, ...) != v}
    assert not wrong and written.get("do_lower_case") is lowercase, \
        (f"{fn}: tokenizer_config.json differs from what HF writes (ours, HF's): {wrong}; "
         f"do_lower_case={written.get('do_lower_case')!r}, expected {lowercase}")
    texts = SINGLES[:50] + EDGE_CASES
    _first_difference(f"{fn} -> BertTokenizerFast.from_pretrained", "input ids", ours.encode(texts)[0],
                      BertTokenizerFast.from_pretrained(str(folder))(texts, truncation=True)["input_ids"], texts)
    (folder / "config.json").write_text("{}")   # hub.resolve wants a model folder
    (folder / "model.safetensors").write_bytes(b"")
    back = Tokenizer.from_pretrained(folder)
    assert back.lowercase is lowercase, f"{fn} -> Tokenizer.from_pretrained: lowercase={back.lowercase}, expected {lowercase}"
