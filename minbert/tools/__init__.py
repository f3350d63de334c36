"""tools: commands that sit around training runs (`python -m minbert <command>`).

download (the datasets), simcse_stage (train an encoder with SimCSE before fine-tuning),
study and mml_study (the two seeded studies), study_table (the multitask study's tables), seed_statistics
(intervals and Holm-adjusted p-values), seed_example_bootstrap (a paired difference resampled over seeds and
examples), ensemble (combine finished runs); a finished run in use: trained_run (minbert.load_run: the model
rebuilt from the run's record, also what --predict_only loads), predict (its heads on your sentences),
export_hf (a head as a Hugging Face classifier) and export_st (a mean-pooled run as a sentence-transformers
folder).
"""
