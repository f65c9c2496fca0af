"""cg-advise: find out from a real trace whether CUDA Graphs will speed up a PyTorch loop."""

__version__ = "0.1.0"
