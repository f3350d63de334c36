"""bert: the model, as in HF's models/bert/: configuration, modeling and tokenization side by side.

Read in this order: config.py, attention.py (the lesson), dropout.py, layers.py, model.py
(BertModel, and loading the public bert-base-uncased weights). tokenizer.py wraps the `tokenizers`
WordPiece; compiled.py is an optional torch.compile of the blocks.
"""
