"""Focused what-if calculations behind ``roofline kv``, ``moe``, ``attention-io``, ``compare``,
``speculative``, ``disagg`` and ``sweep`` (``roofline rope``: ``rooflinecli.rope``).

Each module computes plain data (dataclasses, dicts, numpy arrays) from the cost formulas in
``rooflinecli.formulas`` and the analytical model in ``rooflinecli.analysis``; the CLI modules only
parse options and render. Nothing here imports torch, triton, pandas or plotly at module level.
"""
