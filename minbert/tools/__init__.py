"""tools: commands that sit around training runs (`python -m minbert <command>`).

download (the datasets), simcse_stage (train an encoder with SimCSE before fine-tuning), ensemble (combine
finished runs with minbert/methods/ensemble.py); a finished run in use: trained_run (minbert.load_run: the model
rebuilt from the run's record, also what --predict_only loads), predict (its heads on your sentences), export_hf (a
head as a Hugging Face classifier) and export_st (a mean-pooled run as a sentence-transformers folder).
"""
