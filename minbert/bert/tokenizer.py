"""
BERT's WordPiece tokenizer, assembled from the parts in the `tokenizers` library (Rust, fast).

minbert does not hand-write tokenization; it wires up the same four stages as Hugging Face's
`BertTokenizerFast` (Devlin et al. 2018, arXiv:1810.04805, section 3; WordPiece: Wu et al. 2016,
arXiv:1609.08144), so the ids are identical:

1. normaliser `BertNormalizer`: clean control characters, put spaces around Chinese characters,
   lowercase and strip accents when the checkpoint is uncased (HF's rule: accents are stripped
   exactly when lowercasing, unless a config says otherwise);
2. pre-tokeniser `BertPreTokenizer`: split on whitespace and punctuation;
3. model `WordPiece`: greedy longest-match-first against vocab.txt, continuation pieces prefixed
   with "##", and "[UNK]" for a word with no match or longer than 100 characters;
4. post-processor `TemplateProcessing`: add the special tokens and token type ids

       single:  [CLS] a [SEP]              type ids 0 0 0
       pair:    [CLS] a [SEP] b [SEP]      type ids 0 0 0 1 1

Special tokens typed in the text ("[MASK]") are kept whole, as in HF. Sequences are truncated to
`max_length` including the specials; for pairs "longest_first" removes one token at a time from
the longer of the two. Padding is dynamic: `pad` pads to the longest sequence in the batch, not
to `max_length`, which is much faster on short sentences.

Saving: `save_pretrained(directory)` copies vocab.txt byte for byte and writes
tokenizer_config.json with `do_lower_case` stated explicitly, so a saved model folder never
depends on its name for casing (Hugging Face's BertTokenizer reads the same two files).

Deliberately left out: training a vocabulary, character offsets, overflowing tokens / stride,
left padding, a `strip_accents` setting that differs from `lowercase`, and return types other
than torch tensors.
"""

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer as RustTokenizer
from tokenizers import decoders, models, normalizers, pre_tokenizers, processors

from minbert.core.atomic import atomic_write
from minbert.core.hub import resolve

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class Tokenizer:
    def __init__(self, vocab_file, lowercase: bool = True):
        vocab = models.WordPiece.read_file(str(vocab_file))  # {token: id}, id = line number
        missing = [t for t in SPECIAL_TOKENS if t not in vocab]
        if missing:
            raise ValueError(f"{vocab_file} lacks the special tokens {missing}; is it a BERT vocab.txt?")
        self.lowercase = lowercase
        self.vocab_file = Path(vocab_file)  # save_pretrained copies it unchanged
        self.pad_id, self.cls_id, self.sep_id = vocab["[PAD]"], vocab["[CLS]"], vocab["[SEP]"]
        self.vocab_size = len(vocab)

        tok = RustTokenizer(models.WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
        # strip_accents=None means "follow lowercase", HF's default for BERT
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=lowercase)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        # "$B:1" and "[SEP]:1": the second sentence and its [SEP] get token type id 1
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", self.cls_id), ("[SEP]", self.sep_id)])
        tok.decoder = decoders.WordPiece(prefix="##")  # glue "##" pieces back onto their word
        # specials are matched in the raw text before normalising, so "[MASK]" stays one token
        tok.add_special_tokens(list(SPECIAL_TOKENS))
        self._tok = tok

    @classmethod
    def from_pretrained(cls, name_or_path) -> "Tokenizer":
        """Load vocab.txt of a checkpoint (any name or path `minbert.core.hub.resolve` accepts)."""
        path = resolve(name_or_path)
        directory = path if path.is_dir() else path.parent  # resolve may return the weights file
        if not (directory / "vocab.txt").is_file():
            raise FileNotFoundError(f"no vocab.txt in {directory}: minbert needs a WordPiece vocabulary")
        config_file = directory / "tokenizer_config.json"
        config = json.loads(config_file.read_text()) if config_file.is_file() else {}
        if "do_lower_case" in config:
            lowercase = bool(config["do_lower_case"])
        else:  # fall back on the naming convention: bert-base-cased vs bert-base-uncased
            # judge a hub name as given, a local path by its folder name only
            name = (directory.name if Path(name_or_path).exists() else str(name_or_path)).lower()
            lowercase = not ("cased" in name and "uncased" not in name)
        return cls(directory / "vocab.txt", lowercase=lowercase)

    def save_pretrained(self, directory) -> None:
        """Write vocab.txt (a byte copy) and tokenizer_config.json into `directory`: with a
        model's config.json and weights this makes a folder `--model` accepts."""
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        data = self.vocab_file.read_bytes()
        atomic_write(directory / "vocab.txt", lambda p: Path(p).write_bytes(data))
        # the keys Hugging Face's BertTokenizer reads; do_lower_case is what from_pretrained reads, model_max_length
        # what HF truncates to (BERT's 512 positions, this class's max_length)
        config = {"tokenizer_class": "BertTokenizer", "do_lower_case": self.lowercase,
                  "strip_accents": None, "tokenize_chinese_chars": True, "model_max_length": 512}
        text = json.dumps(config, indent=2)
        atomic_write(directory / "tokenizer_config.json", lambda p: Path(p).write_text(text))

    def encode(self, texts: list[str], pairs: list[str] | None = None,
               max_length: int = 512) -> tuple[list[list[int]], list[list[int]]]:
        """Unpadded ids and token type ids, truncated to max_length (incl. specials). Uses the
        tokenizers library's batch encoding (fast, multi-threaded)."""
        if pairs is not None and len(pairs) != len(texts):
            raise ValueError(f"Tokenizer.encode: {len(texts)} texts but {len(pairs)} pairs")
        # longest_first: trim the longer of a and b one token at a time until the pair fits
        self._tok.enable_truncation(max_length, strategy="longest_first")
        inputs = list(texts) if pairs is None else list(zip(texts, pairs))
        encodings = self._tok.encode_batch(inputs)
        return [e.ids for e in encodings], [e.type_ids for e in encodings]

    def pad(self, ids: list[list[int]], type_ids: list[list[int]]) -> dict[str, torch.Tensor]:
        """Pad to the longest in the batch: input_ids (B,T) long, attention_mask (B,T) long
        (1 real, 0 pad), token_type_ids (B,T) long."""
        B, T = len(ids), max((len(x) for x in ids), default=0)
        input_ids = torch.full((B, T), self.pad_id, dtype=torch.long)
        attention_mask = torch.zeros(B, T, dtype=torch.long)
        token_type_ids = torch.zeros(B, T, dtype=torch.long)
        for b, (row, types) in enumerate(zip(ids, type_ids)):
            # real tokens on the left, padding on the right
            input_ids[b, :len(row)] = torch.tensor(row, dtype=torch.long)
            attention_mask[b, :len(row)] = 1
            token_type_ids[b, :len(types)] = torch.tensor(types, dtype=torch.long)
        return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}

    def __call__(self, texts, pairs=None, max_length=512, return_tensors="pt") -> dict[str, torch.Tensor]:
        """HF-like convenience: a str or list of str (pairs likewise); = pad(*encode(...)).
        Only return_tensors='pt' supported (clear error otherwise)."""
        if return_tensors != "pt":
            raise ValueError(f"Tokenizer: only return_tensors='pt' is supported, got {return_tensors!r}")
        texts = [texts] if isinstance(texts, str) else texts
        pairs = [pairs] if isinstance(pairs, str) else pairs
        return self.pad(*self.encode(texts, pairs, max_length=max_length))

    def decode(self, ids: list[int]) -> str:
        """Ids back to text, without special tokens (lowercased and accent-free if uncased)."""
        return self._tok.decode(ids, skip_special_tokens=True)
