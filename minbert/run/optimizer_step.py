"""The optimizer step both scripts take: AMP's loss scaling, and no NaN or inf ever written into the weights.

`OptimizerStep(optimizer, scheduler, scaler)`: `step.backward(loss)` (scaled under fp16), then `step(finite)`: the
update, the LR schedule, zeroed gradients. With a GradScaler (fp16) the scaler itself skips an update whose
gradients overflowed; without one an update is skipped when a task loss of the step was not finite. Ten skipped
steps in a row stop the run with advice: that is a diverged run, not a bad batch. The schedule moves on either
way, so a resumed run and an uninterrupted one see the same learning rates. Each update keeps what the log reads,
`last_lr` and `grad_norm` (docs/outputs.md says where in the step it is taken).
"""

import torch

from minbert.run import distributed
from minbert.core.errors import UserError

MAX_BAD_STEPS = 10


class OptimizerStep:
    def __init__(self, optimizer, scheduler=None, scaler=None, out_dir: str = "the run folder"):
        self.optimizer, self.scheduler, self.scaler, self.out_dir = optimizer, scheduler, scaler, out_dir
        self.bad_steps = 0
        self.world = distributed.world_size()   # build it after distributed.setup()
        self.grad_norm, self.last_lr = None, [g["lr"] for g in optimizer.param_groups]

    def backward(self, loss: torch.Tensor) -> None:
        (self.scaler.scale(loss) if self.scaler else loss).backward()

    def __call__(self, finite: bool = True) -> bool:
        """Update the weights (unless a loss of this step was not finite on any rank); returns whether it did."""
        if self.world > 1:      # every rank skips together: a rank stepping alone would break DDP's identical weights
            finite = not distributed.any_rank(not finite)
        self.last_lr = [g["lr"] for g in self.optimizer.param_groups]
        self.grad_norm = self.gradient_norm()
        if self.scaler:         # skips the step itself when the scaled gradients overflowed
            self.scaler.step(self.optimizer)
            self.scaler.update()
        elif finite:
            self.optimizer.step()
        if self.scheduler is not None:
            self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.bad_steps = 0 if finite else self.bad_steps + 1
        if self.bad_steps >= MAX_BAD_STEPS:
            raise UserError(f"{MAX_BAD_STEPS} optimizer steps in a row had a non-finite loss: lower --lr or use "
                            f"--amp off; {self.out_dir}/last.pt holds the last finished epoch")
        return finite

    def gradient_norm(self) -> torch.Tensor:
        """‖g‖₂ over every gradient of the optimizer's parameters (0-d), unscaled first under fp16."""
        if self.scaler:
            self.scaler.unscale_(self.optimizer)
        grads = [p.grad for g in self.optimizer.param_groups for p in g["params"] if p.grad is not None]
        if not grads:
            return torch.zeros(())
        # clip_grad_norm_'s own total norm: one fused (foreach) norm over the P tensors, not P launches a step
        return torch.nn.utils.get_total_norm(grads)
