"""Names of the NVTX ranges that `cg-advise profile` injects; the analyser looks for them."""

PREFIX = "cg-advise:"
ITERATION = PREFIX + "iteration"   # one training step: from the end of one optimizer step to the next
FORWARD = PREFIX + "forward"       # one call of a top-level module (the inference iteration)
MODULE = PREFIX + "module:"        # followed by the name of a child of the top-level module
BACKWARD = PREFIX + "backward"     # one torch.autograd.backward call (a start/end range: autograd's
                                   # device thread launches the kernels)
OPTIMIZER = PREFIX + "optimizer"   # one optimizer.step() call
ZERO_GRAD = PREFIX + "zero_grad"   # one optimizer.zero_grad() or module.zero_grad() call
# PyTorch's own record_function ranges around every torch.optim optimizer's step and zero_grad
# ("Optimizer.step#AdamW.step"): in any torch.profiler trace, in nsys only under emit_nvtx
TORCH_ZERO_GRAD_PREFIX = "Optimizer.zero_grad#"
TORCH_OPTIMIZER_PREFIXES = ("Optimizer.step#", TORCH_ZERO_GRAD_PREFIX)

# Default iteration pattern: our own training ranges, else our forward ranges.
DEFAULT_ITERATION_NAMES = (ITERATION, FORWARD)
