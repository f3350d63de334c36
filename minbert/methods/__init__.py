"""methods: one paper per file. Each file opens with the paper, the equation, its defaults, the
variant chosen and what is left out; each owns its flags (add_args / from_args).

PALs (pals), SMART (smart), R3F/R4F (r3f), PCGrad (pcgrad), GradVac (gradvac), Gradient Compromise
(gradient_compromise), MNR loss (mnr), loss scaling (loss_scaling), head pretraining (head_pretraining),
MML (mml) and its paper's protocol (mml_protocol), MeanShift (meanshift), SimCSE (simcse) and output ensembles
(ensemble).
"""
