"""The CI performance gate and the checks that keep the model honest.

- ``decision``: the gate's rule (one vectorized ``decide``) and ``compare``, which turns a baseline
  and a candidate results file into a ``RegressReport``;
- ``render``: that report as a terminal table, JSON, Markdown (a PR comment, a job summary) and
  JUnit XML, and the one place the gate's outputs are written;
- ``baseline``: per-GPU baselines pooled over the last K runs;
- ``sim``: the simulation that measures the gate's catch and false-alarm rates;
- ``golden``: the analytical model's golden predictions.
"""
