"""methods: one paper per file. Each file opens with the paper, the equation, its defaults, the
variant chosen and what is left out; each owns its flags (add_args / from_args).

PALs (pals), SMART (smart), R3F/R4F (r3f), PCGrad (pcgrad), GradVac (gradvac), Gradient Compromise
(gradient_compromise), MNR loss (mnr), loss scaling, head pretraining, MML (mml), MeanShift
(meanshift) and SimCSE (simcse).
"""
