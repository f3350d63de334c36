"""tools: commands that sit around training runs (`python -m minbert <command>`).

download (data and checkpoints), simcse_stage (train an encoder with SimCSE before fine-tuning),
study and mml_study (the two seeded studies), study_table (the multitask study's tables), seed_statistics
(intervals and Holm-adjusted p-values), seed_example_bootstrap (a paired difference resampled over seeds and
examples), ensemble (combine finished runs), predict (a run's heads on new sentences) and export_hf (a run's
head as a Hugging Face model).
"""
