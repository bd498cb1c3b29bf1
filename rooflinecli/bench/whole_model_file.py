"""The results file of ``roofline e2e --full``: whole-model runs kept under
``extra.end_to_end_full`` (schema ``E2E_FULL_SCHEMA``), one entry per model, merged into the file a
run names (other models' entries are kept) and saved after every point, so a run killed by its
timeout keeps what it measured. One file holds the runs of one GPU."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rooflinecli.errors import RooflineError
from rooflinecli.results import Results, load_results

E2E_FULL_SCHEMA = "rooflinecli.e2e_full/1"


@dataclass
class WholeModelFile:
    """``path``'s results (or a new, empty set) with the ``end_to_end_full`` section of this run."""

    path: Path
    base: Results
    section: dict[str, Any]
    models: dict[str, Any]

    @classmethod
    def open(cls, path: Path, environment: dict[str, Any], datasheet, measured, tool_version: str, created_utc: str) -> WholeModelFile:
        """The file at ``path`` (new when absent) for a run on ``environment``'s GPU with the
        ``datasheet`` and ``measured`` specs; a file of another GPU is refused (one line)."""
        if path.is_file():
            base = load_results(path)
        else:
            base = Results(rows=(), environment=environment, created_utc=created_utc, tool_version=tool_version, suite="e2e",
                           hardware_spec=datasheet.id, measured_spec=measured.id if measured else None)
        old = dict(base.extra.get("end_to_end_full") or {})
        before = old.get("environment") or {}
        if before.get("gpu_name") and before.get("gpu_name") != environment.get("gpu_name"):
            raise RooflineError(f"{path}: holds whole-model runs on '{before.get('gpu_name')}'; this one runs on "
                                f"'{environment.get('gpu_name')}': write it to another file (-r)")
        section = {**old, "schema": E2E_FULL_SCHEMA, "datasheet_spec": datasheet.id, "measured_spec": measured.id if measured else None,
                   "measured_spec_path": str(measured.path) if measured else None, "environment": environment}
        return cls(path, base, section, dict(old.get("models") or {}))

    def save(self, model: str, entry: dict[str, Any]) -> None:
        """``entry`` as ``model``'s run (replacing an earlier one), the whole file written atomically."""
        self.models[model] = entry
        replace(self.base, extra={**self.base.extra, "end_to_end_full": {**self.section, "models": self.models}}).save(self.path)
