"""rooflinecli: how fast an LLM *should* run on a GPU, checked against measured Triton kernels.

The analytical core (everything importable from this package without the ``kernels`` extra) uses
only the standard library and numpy. torch, triton, pandas and plotly are imported lazily inside the
commands that need them.
"""

__version__ = "0.1.0"
