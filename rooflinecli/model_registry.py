"""Model presets by id, or any Hugging Face ``config.json`` by path.

Presets are data: ``rooflinecli/model_presets/<id>.json`` files holding the published config.json
fields plus a ``"_rooflinecli"`` object (id, display name, source URL, published counts). To add a
model, drop its config.json there with that object (see docs/models.md).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from rooflinecli.errors import RooflineError, unknown_name_error
from rooflinecli.hf_config import load_hf_config
from rooflinecli.models import ModelConfig


def presets_dir() -> Path:
    return Path(__file__).resolve().parent / "model_presets"


@lru_cache(maxsize=None)
def _preset_paths() -> dict[str, Path]:
    d = presets_dir()
    if not d.is_dir():
        raise RooflineError(f"model presets folder not found: {d}")
    return {p.stem: p for p in sorted(d.glob("*.json"))}


def preset_ids() -> list[str]:
    """Ids of the built-in presets (file stems of ``model_presets/*.json``), sorted."""
    return list(_preset_paths())


@lru_cache(maxsize=None)
def get_preset(preset_id: str) -> ModelConfig:
    """A built-in preset by id; the file's ``_rooflinecli.id`` must equal its stem."""
    paths = _preset_paths()
    if preset_id not in paths:
        raise unknown_name_error("model", preset_id, paths)
    path = paths[preset_id]
    cfg = load_hf_config(path, name=preset_id)
    if cfg.name != preset_id:
        raise RooflineError(f"{path}: field '_rooflinecli.id' is '{cfg.name}' but the file is named '{preset_id}.json'")
    return cfg.with_(source=f"preset:{path.name}")


def _looks_like_path(name: str) -> bool:
    return name.endswith(".json") or "/" in name or "\\" in name or name.startswith(".")


def get_model(name_or_path: str) -> ModelConfig:
    """A preset id (``llama-3-70b``), or a path to a config.json (or to a folder holding one)."""
    if name_or_path in _preset_paths():
        return get_preset(name_or_path)
    p = Path(name_or_path)
    if _looks_like_path(name_or_path) or p.exists():
        if p.is_dir():
            p = p / "config.json"
        return load_hf_config(p)
    raise unknown_name_error("model", name_or_path, _preset_paths())


def all_presets() -> list[ModelConfig]:
    return [get_preset(i) for i in preset_ids()]
