"""``--mode`` and ``--engine``: the options every command that predicts times takes.

``--mode`` defaults to "achievable" on a calibrated spec (a measured spec naming its calibration
file, e.g. ``--hw h200-measured``) and to the roof of the spec's own kind otherwise;
``rooflinecli.predict.resolve_mode`` resolves it per spec.
"""

from __future__ import annotations

from typing import Annotated

import typer

from rooflinecli.cli.options import engine_name, mode_name

ModeOption = Annotated[
    str | None,
    typer.Option("--mode", help="datasheet (the roofline on the datasheet's figures), measured-roof (on a measured spec's measured roof), roof (the roof of the spec's own kind) or achievable (the calibrated kernel model; default on a calibrated spec such as h200-measured).",
                 parser=mode_name, metavar="MODE"),
]
EngineOption = Annotated[
    str | None,
    typer.Option("--engine", help="The engine whose kernels are timed: torch (one kernel per torch op, decode in a CUDA graph), fused (fused "
                 "elementwise kernels), or vllm, sglang, trtllm (the engines' measured kernels, imported per GPU: see `roofline hw list`). "
                 "Default: torch; with --mode achievable on a GPU calibrated for serving engines only, the first of vllm, trtllm, sglang.",
                 parser=engine_name, metavar="ENGINE"),
]
