"""Names of the NVTX ranges that `cg-advise profile` injects; the analyser looks for them."""

PREFIX = "cg-advise:"
ITERATION = PREFIX + "iteration"   # one training step: from the end of one optimizer step to the next
FORWARD = PREFIX + "forward"       # one call of a top-level module (the inference iteration)
MODULE = PREFIX + "module:"        # followed by the name of a child of the top-level module
BACKWARD = PREFIX + "backward"     # one torch.autograd.backward call (a start/end range: autograd's
                                   # device thread launches the kernels)
OPTIMIZER = PREFIX + "optimizer"   # one optimizer.step() call

# Default iteration pattern: our own training ranges, else our forward ranges.
DEFAULT_ITERATION_NAMES = (ITERATION, FORWARD)
