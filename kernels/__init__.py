"""Triton kernels for the ops of LLM inference, each with its PyTorch reference and its cost from
``rooflinecli.formulas``. Importing this package imports nothing heavy; ``kernels.registry``
lists the ops and ``kernels.<op>`` imports torch and triton."""
