"""tools: commands that sit around training runs (`python -m minbert <command>`).

download (the datasets), simcse_stage (train an encoder with SimCSE before fine-tuning),
study and mml_study (the two seeded studies and their tables), seed_statistics (intervals and
Holm-adjusted p-values), ensemble (combine finished runs), export_st (a mean-pooled run as a
sentence-transformers folder).
"""
