"""``roofline report``: one self-contained, offline HTML file with interactive roofline plots.

Three steps, each usable alone::

    data = build_report_data(cfg, specs, workload, results=..., baseline=...)  # JSON-ready dict
    page = render_report(data)                                                 # HTML text (plotly here)
    write_report(page, "reports/my-report.html")                               # atomic write

``build_report_data`` needs numpy only; plotly is imported by ``render_report``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from .data import SCHEMA, build_report_data

__all__ = ["SCHEMA", "build_report_data", "default_out_path", "extract_report_data", "render_report", "write_report"]


def render_report(data: dict[str, Any]) -> str:
    """The HTML page of a report data dict: figures as plotly JSON, plotly.js inlined once."""
    from plotly.offline import get_plotlyjs

    from .figures import all_figures
    from .html import render_page

    figs = {fid: fig.to_json(validate=False) for fid, fig in all_figures(data).items()}
    bundle = re.sub(r"</(script)", r"<\\/\1", get_plotlyjs(), flags=re.IGNORECASE)
    return render_page(data, figs, bundle)


def write_report(page: str, out: str | Path, make_parents: bool = False) -> Path:
    """Write the page atomically (a reader sees the old file or the whole new one)."""
    from rooflinecli.output import atomic_output

    out = Path(out)
    with atomic_output(out, make_parents=make_parents) as tmp:
        tmp.write_text(page, encoding="utf-8")
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.") or "x"


def default_out_path(model: str, hw_ids: list[str]) -> Path:
    """``reports/roofline-<model>-<gpu>[-<gpu>...].html`` (a config path contributes its stem)."""
    stem = Path(model).stem if model.endswith(".json") else model
    if stem == "config" and Path(model).parent.name:
        stem = Path(model).parent.name
    return Path("reports") / f"roofline-{_slug(stem)}-{'-'.join(_slug(h) for h in hw_ids)}.html"


def extract_report_data(page: str) -> dict[str, Any]:
    """The data a report embeds (``<script type="application/json" id="report-data">``)."""
    import json

    from rooflinecli.errors import RooflineError

    m = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S)
    if m is None:
        raise RooflineError("not a rooflinecli report: no report-data block")
    return json.loads(m.group(1))
