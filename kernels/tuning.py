"""Reproducible tuning: find every Triton autotuner of the kernels, apply committed configs, and
record which config each autotuned kernel ran with.

* ``discover_autotuners()``: every module-level ``triton.runtime.autotuner.Autotuner`` in
  ``kernels/*.py`` (also inside dicts, lists and tuples, as gemm's ``{BLOCK_M: autotuner}``), named
  ``"<module>.<attr>[.<dict key or index>]"``. Generic: a kernel rewritten with other autotuners
  needs no change here.
* Committed configs live in ``kernels/tuned/<gpu-slug>-triton<version>.json`` (``gpu_slug`` of
  ``torch.cuda.get_device_name()``, e.g. ``nvidia-h200-triton3.6.0.json``)::

      {"schema": "rooflinecli.tuned/1", "gpu": "NVIDIA H200", "triton": "3.6.0", "created_utc": "...",
       "autotuners": {"gemm._skinny.16": [{"key": [1, 8192, 8192, 2, "torch.bfloat16", ...],
                                           "config": {"kwargs": {...}, "num_warps": 4, "num_stages": 4},
                                           "median_us": 39.7, "case": "gemm M1-N8192-K8192-bf16"}]}}

  ``key`` is the autotuner's cache key: the values of its ``key`` arguments, then ``str(dtype)`` of
  every tensor argument in argument order (``Autotuner.run`` in Triton 3.6 and 3.9 alike).
  ``apply_committed`` pre-fills ``Autotuner.cache`` with them, so a committed key is never tuned.
  A file of another GPU or Triton version, malformed JSON, an unknown field, an unknown autotuner
  name or a config that is not among the autotuner's configs: one warning line, nothing applied,
  run-time autotuning as before (rows say ``tuning = "autotuned"``).
* ``use_graph_benchmarks``: keys that are not committed are tuned at run time with each config
  timed as CUDA-graph replay (``graph_benchmarker``), not Triton's event timer (bench and tune on a
  GPU set it).
* ``Choice``: a launcher's run-time choice between variants (decode attention's schedule), timed
  once per key and committed in the same file's ``choices`` section (``roofline tune`` writes it).
* ``Recorder``: while active, every autotuner call and every choice records (name, key, config or
  value, source); the runner turns that into ``ResultRow.config`` and ``ResultRow.tuning``.

triton is imported inside the functions; ``gpu_slug`` and the file checks need neither torch nor
triton.
"""

from __future__ import annotations

import importlib
import json
import numbers
import pkgutil
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rooflinecli.errors import json_object_once, one_line

TUNED_DIR = Path(__file__).resolve().parent / "tuned"
TUNED_SCHEMA = "rooflinecli.tuned/1"
#: kernels/ modules that hold no kernels
NOT_KERNEL_MODULES = frozenset({"registry", "testing", "tuning"})
_ENTRY_FIELDS = {"key", "config", "median_us", "case"}
_CONFIG_FIELDS = {"kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg"}
_TOP_FIELDS = {"schema", "gpu", "triton", "torch", "created_utc", "autotuners", "note", "choices"}
_CHOICE_FIELDS = {"key", "value", "times_us", "case"}


class TunedFileError(ValueError):
    """A tuned-config file that cannot be applied (the message is one line)."""


def gpu_slug(gpu_name: str) -> str:
    """``"NVIDIA H200"`` -> ``"nvidia-h200"``: lower case, runs of other characters to one dash."""
    return re.sub(r"[^a-z0-9]+", "-", gpu_name.lower()).strip("-") or "unknown-gpu"


def tuned_path(gpu_name: str, triton_version: str, folder: Path = TUNED_DIR) -> Path:
    return folder / f"{gpu_slug(gpu_name)}-triton{triton_version}.json"


# ------------------------------------------------------------------------------------------------
# discovery
# ------------------------------------------------------------------------------------------------


def kernel_modules() -> list[str]:
    """Names of the kernel modules in ``kernels/`` (``copy``, ``gemm``, ...), sorted."""
    import kernels

    return sorted(m.name for m in pkgutil.iter_modules(kernels.__path__) if not m.ispkg and m.name not in NOT_KERNEL_MODULES and not m.name.startswith("_"))


def autotuners_in(module_name: str, namespace: Mapping[str, Any]) -> dict[str, Any]:
    """The autotuners among ``namespace``'s values (one level into dicts, lists and tuples)."""
    from triton.runtime.autotuner import Autotuner

    found: dict[str, Any] = {}
    for attr, value in namespace.items():
        if attr.startswith("__"):
            continue
        if isinstance(value, Autotuner):
            found[f"{module_name}.{attr}"] = value
        elif isinstance(value, Mapping):
            for k, v in value.items():
                if isinstance(v, Autotuner):
                    found[f"{module_name}.{attr}.{k}"] = v
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                if isinstance(v, Autotuner):
                    found[f"{module_name}.{attr}.{i}"] = v
    return found


def discover_autotuners(modules: Iterable[str] | None = None) -> dict[str, Any]:
    """Every autotuner of the kernel modules, by name; an object reachable under two names keeps
    the first in sorted order. A module that fails to import is left out (``bench`` reports its
    failure on its own cases)."""
    found: dict[str, Any] = {}
    seen: set[int] = set()
    for mod in modules if modules is not None else kernel_modules():
        try:
            module = importlib.import_module(f"kernels.{mod}")
        except Exception:  # noqa: BLE001 - a broken kernel module must not stop the others
            continue
        for name, at in sorted(autotuners_in(mod, vars(module)).items()):
            if id(at) not in seen:
                seen.add(id(at))
                found[name] = at
    return found


class Choice:
    """A launcher's run-time choice between named variants (decode attention's work schedule),
    tuned and committed like an autotuner's config. ``cache``: key -> value (the launcher reads
    it, and times the variants for a key it lacks); ``times``: key -> {value: ms} of the choices
    timed in this process (what ``roofline tune`` writes); ``committed``: the keys a tuned file
    set. ``get`` and ``put`` record a ``Call`` with every active ``Recorder``, so a results row
    names the choice and whether it was committed or timed. A key is a tuple of JSON scalars."""

    def __init__(self, name: str, values: Iterable[str]) -> None:
        self.name = name
        self.values = tuple(values)
        self.cache: dict[tuple, str] = {}
        self.times: dict[tuple, dict[str, float]] = {}
        self.committed: set[tuple] = set()

    def get(self, key: tuple) -> str | None:
        value = self.cache.get(key)
        if value is not None:
            _record(Call(self.name, key, value, "committed" if key in self.committed else "autotuned"))
        return value

    def put(self, key: tuple, value: str, times_ms: Mapping[str, float]) -> None:
        if value not in self.values:
            raise ValueError(f"{self.name}: {value!r} is not one of {self.values}")
        self.cache[key] = value
        self.times[key] = {k: float(v) for k, v in times_ms.items()}
        self.committed.discard(key)
        _record(Call(self.name, key, value, "autotuned"))


def discover_choices(modules: Iterable[str] | None = None) -> dict[str, Choice]:
    """Every ``Choice`` defined at module level in the kernel modules, by its own name."""
    found: dict[str, Choice] = {}
    for mod in modules if modules is not None else kernel_modules():
        try:
            module = importlib.import_module(f"kernels.{mod}")
        except Exception:  # noqa: BLE001 - as discover_autotuners
            continue
        for value in vars(module).values():
            if isinstance(value, Choice):
                found.setdefault(value.name, value)
    return found


# ------------------------------------------------------------------------------------------------
# keys and configs as JSON
# ------------------------------------------------------------------------------------------------


def call_key(autotuner, args: tuple, kwargs: Mapping[str, Any]) -> tuple:
    """The cache key ``Autotuner.run`` computes for this call (Triton 3.6 and 3.9): the values of
    the ``key`` arguments present, then ``str(dtype)`` of every argument that has a dtype."""
    all_args = {**dict(zip(autotuner.arg_names, args)), **kwargs}
    named = {k: v for k, v in all_args.items() if k in autotuner.arg_names}
    key = [named[k] for k in autotuner.keys if k in named]
    key += [str(v.dtype) for v in named.values() if hasattr(v, "dtype")]
    return tuple(key)


def _json_value(v: Any) -> Any:
    """A key value as JSON: numbers (numpy's too) as Python numbers, so that the loaded key
    compares and hashes equal to the one Triton computes; anything else as its text."""
    if isinstance(v, (bool, str)) or v is None:
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return float(v)
    return str(v)


def key_json(key: tuple) -> list:
    return [_json_value(v) for v in key]


def config_json(cfg) -> dict[str, Any]:
    """A ``triton.Config`` as JSON: kwargs, num_warps, num_stages (num_ctas/maxnreg when set)."""
    out: dict[str, Any] = {"kwargs": dict(cfg.kwargs), "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
    if getattr(cfg, "num_ctas", 1) not in (None, 1):
        out["num_ctas"] = cfg.num_ctas
    if getattr(cfg, "maxnreg", None) is not None:
        out["maxnreg"] = cfg.maxnreg
    return out


def find_config(autotuner, cfg: Mapping[str, Any]):
    """The autotuner's own ``Config`` equal to ``cfg`` (JSON form), or None."""
    for c in autotuner.configs:
        if config_json(c) == dict(cfg):
            return c
    return None


def simplicity(cfg: Mapping[str, Any]) -> tuple:
    """Sort key of "simpler" (smaller is simpler): num_warps x num_stages first (fewer threads and
    pipeline buffers), then the product of the ``BLOCK*`` tile sizes (smaller tiles), then the sum
    of the other integer kwargs, then the text (a total order)."""
    kwargs = dict(cfg.get("kwargs", {}))
    blocks = 1
    others = 0
    for k, v in kwargs.items():
        if isinstance(v, bool) or not isinstance(v, int):
            continue
        if k.upper().startswith("BLOCK"):
            blocks *= v
        else:
            others += v
    return (int(cfg.get("num_warps", 4)) * int(cfg.get("num_stages", 3)), blocks, others, json.dumps(cfg, sort_keys=True))


def pick_config(medians_s: Mapping[str, float], configs: Mapping[str, Mapping[str, Any]], tie: float = 0.02) -> str:
    """The fastest median of ``medians_s`` (by config id); every config within ``tie`` (2%) of it
    is a near-tie, and the simplest near-tie (``simplicity``) wins."""
    finite = {k: v for k, v in medians_s.items() if v == v and v != float("inf")}
    if not finite:
        raise ValueError("no config ran")
    best = min(finite.values())
    near = [k for k, v in finite.items() if v <= best * (1 + tie)]
    return min(near, key=lambda k: simplicity(configs[k]))


# ------------------------------------------------------------------------------------------------
# the committed file
# ------------------------------------------------------------------------------------------------


@dataclass
class Committed:
    """Configs applied from a tuned file: ``{autotuner name: {key: Config}}``, and what happened."""

    path: str = ""
    entries: dict[str, dict[tuple, Any]] = field(default_factory=dict)
    status: str = "none"  # "applied" | "missing" | "rejected" | "none"
    message: str = ""
    #: ``{choice name: {key: value}}`` (``Choice``)
    choices: dict[str, dict[tuple, str]] = field(default_factory=dict)

    def is_committed(self, name: str, key: tuple, cfg) -> bool:
        return self.entries.get(name, {}).get(key) is cfg


def parse_tuned(raw: Any, autotuners: Mapping[str, Any], gpu_name: str, triton_version: str) -> dict[str, dict[tuple, Any]]:
    """Check a tuned file's JSON against this GPU, this Triton and these autotuners; returns
    ``{name: {key: Config}}`` or raises ``TunedFileError`` (one line)."""
    if not isinstance(raw, dict) or raw.get("schema") != TUNED_SCHEMA:
        raise TunedFileError(f"not a tuned-config file (schema must be '{TUNED_SCHEMA}')")
    unknown = set(raw) - _TOP_FIELDS
    if unknown:
        raise TunedFileError(f"unknown field '{sorted(unknown)[0]}'")
    if raw.get("gpu") != gpu_name:
        raise TunedFileError(f"tuned on GPU '{one_line(raw.get('gpu'))[:100]}', this is '{gpu_name}'")
    if str(raw.get("triton")) != triton_version:
        raise TunedFileError(f"tuned with Triton {one_line(raw.get('triton'))[:40]}, this is Triton {triton_version}")
    out: dict[str, dict[tuple, Any]] = {}
    for name, entries in _section(raw, "autotuners", autotuners, "autotuner", required=True).items():
        at = autotuners[name]
        out[name] = {}
        for where, e in _entries("autotuners", name, entries, "config", _ENTRY_FIELDS):
            if not isinstance(e["config"], dict):
                raise TunedFileError(f"{where}: 'config' must be an object")
            bad = set(e["config"]) - _CONFIG_FIELDS
            if bad:
                raise TunedFileError(f"{where}.config has unknown field '{sorted(bad)[0]}'")
            n_key = len(at.keys)
            if len(e["key"]) < n_key:
                raise TunedFileError(f"{where}: key {e['key']} is shorter than the autotuner's key arguments {list(at.keys)}")
            cfg = find_config(at, e["config"])
            if cfg is None:
                raise TunedFileError(f"{where}: config {json.dumps(e['config'], sort_keys=True)} is not one of {name}'s configs")
            out[name][tuple(e["key"])] = cfg
    return out


def _section(raw: Mapping[str, Any], section: str, known: Mapping[str, Any], kind: str, required: bool = False) -> dict:
    """A tuned file's ``section`` ("autotuners", "choices"): an object whose names are all
    ``known`` (an optional section may be absent)."""
    table = raw.get(section) if required else raw.get(section, {})
    if not isinstance(table, dict):
        raise TunedFileError(f"'{section}' must be an object")
    for name in table:
        if name not in known:
            raise TunedFileError(f"unknown {kind} '{one_line(name)[:60]}' (the kernels have {', '.join(sorted(known)) or 'none'})")
    return table


def _entries(section: str, name: str, entries: Any, second: str, fields: set[str]):
    """(where, entry) of one autotuner's or choice's list in a tuned file, each checked for the
    shape both share: an object with ``key`` (a list of JSON scalars, the cache key's values) and
    ``second``, and no field outside ``fields``."""
    if not isinstance(entries, list):
        raise TunedFileError(f"{section}['{name}'] must be a list")
    for i, e in enumerate(entries):
        where = f"{section}['{name}'][{i}]"
        if not isinstance(e, dict) or "key" not in e or second not in e:
            raise TunedFileError(f"{where} needs 'key' and '{second}'")
        bad = set(e) - fields
        if bad:
            raise TunedFileError(f"{where} has unknown field '{sorted(bad)[0]}'")
        if not isinstance(e["key"], list) or not all(k is None or isinstance(k, (str, int, float, bool)) for k in e["key"]):
            raise TunedFileError(f"{where}: 'key' must be a list of numbers, strings, booleans or nulls (the cache key's values)")
        yield where, e


def parse_choices(raw: Mapping[str, Any], choices: Mapping[str, Choice]) -> dict[str, dict[tuple, str]]:
    """A tuned file's ``choices`` (checked by ``parse_tuned`` for GPU and Triton first):
    ``{name: [{"key": [...], "value": "...", "times_us": {...}, "case": "..."}]}``; a name that is
    no ``Choice``, a value not among its values or a key that is not a list of scalars raises
    ``TunedFileError``."""
    out: dict[str, dict[tuple, str]] = {}
    for name, entries in _section(raw, "choices", choices, "choice").items():
        out[name] = {}
        for where, e in _entries("choices", name, entries, "value", _CHOICE_FIELDS):
            if e["value"] not in choices[name].values:
                raise TunedFileError(f"{where}: value {json.dumps(e['value'])[:40]} is not one of {list(choices[name].values)}")
            out[name][tuple(e["key"])] = e["value"]
    return out


def load_committed(path: Path | str, autotuners: Mapping[str, Any], gpu_name: str, triton_version: str,
                   choices: Mapping[str, Choice] | None = None) -> Committed:
    """Read ``path`` and check it (``parse_tuned``); a missing file is ``status = "missing"``, a
    bad one ``"rejected"`` with the one-line reason in ``message``. Applies nothing."""
    path = Path(path)
    if not path.is_file():
        return Committed(str(path), {}, "missing", f"no committed tuned configs at {path}: autotuning at run time")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"), object_pairs_hook=json_object_once)  # a key given twice: rejected
        entries = parse_tuned(raw, autotuners, gpu_name, triton_version)
        picked = parse_choices(raw, discover_choices() if choices is None else choices)
    except RecursionError:  # nested too deeply to parse
        return Committed(str(path), {}, "rejected", f"warning: {path}: nested too deeply to parse; ignoring it and autotuning at run time")
    except (OSError, ValueError) as e:  # UnicodeDecodeError, JSONDecodeError, TunedFileError, a 5,000-digit integer
        return Committed(str(path), {}, "rejected", f"warning: {path}: {one_line(e)}; ignoring it and autotuning at run time")
    n_choices = sum(map(len, picked.values()))
    return Committed(str(path), entries, "applied", f"{sum(map(len, entries.values()))} committed configs"
                     + (f" and {n_choices} choices" if n_choices else "") + f" from {path}", picked)


def apply_committed(committed: Committed, autotuners: Mapping[str, Any], choices: Mapping[str, Choice] | None = None) -> None:
    """Pre-fill each autotuner's cache with the committed configs (those keys are never tuned), and
    each ``Choice`` with its committed values (those keys are never timed)."""
    for name, table in committed.entries.items():
        autotuners[name].cache.update(table)
    found = discover_choices() if choices is None and committed.choices else (choices or {})
    for name, table in committed.choices.items():
        found[name].cache.update(table)
        found[name].committed.update(table)


# ------------------------------------------------------------------------------------------------
# run-time tuning, graph-timed
# ------------------------------------------------------------------------------------------------

#: ``graph_benchmarker``'s ``rep``: milliseconds of replays per config (Triton's own timer: 100)
GRAPH_BENCH_REP_MS = 25.0


def graph_benchmarker(rep_ms: float = GRAPH_BENCH_REP_MS):
    """A ``do_bench`` for Triton's autotuners that times each config as CUDA-graph replay
    (``triton.testing.do_bench_cudagraph``), i.e. GPU time. Triton's default timer puts CUDA events
    around single eager launches: a kernel shorter than its launcher's host time (skinny GEMMs,
    decode MoE: 30-40 us kernels behind 35-170 us launchers on the H200 host) is then timed as host
    time and the configs' ranking is noise. The inputs stay as the autotuner gives them (a warm L2
    for working sets under 50 MB; the bench's targets stream hundreds of MB). A config whose call
    cannot be captured falls back to Triton's timer."""

    def bench(kernel_call, quantiles=None, **_):
        import torch
        import triton.testing

        try:
            return triton.testing.do_bench_cudagraph(kernel_call, rep=rep_ms, quantiles=quantiles)
        except Exception:  # noqa: BLE001 - a capture that fails: events, as Triton would
            try:
                torch.cuda.synchronize()  # an invalidated capture may report its error once more
            except Exception:  # noqa: BLE001 - a dead context fails in do_bench below, as it would have
                pass
            return triton.testing.do_bench(kernel_call, quantiles=quantiles)

    return bench


def forget_plans() -> list:
    """Make the next call of every kernel read its autotuner's cache again. The launchers keep a
    plan per shape (``_PLANS``: descriptors, grid and the config the autotuner chose on the plan's
    first call, then launched directly) and the fast launch path keeps the config of its first call
    per launch key (``kernels.launch``); both would go on launching that first config after
    ``roofline tune`` puts another one in the cache. Clears both (loaded kernel modules only), and
    returns the plans dropped: a CUDA graph captured from them still launches on their buffers
    (decode's partials and counter), which the caller keeps alive as long as it replays it."""
    import sys

    from kernels import launch

    launch.forget_entries()
    dropped = []
    for mod in kernel_modules():
        plans = getattr(sys.modules.get(f"kernels.{mod}"), "_PLANS", None)
        if isinstance(plans, dict):
            dropped.append(dict(plans))
            plans.clear()
    return dropped


def use_graph_benchmarks(autotuners: Mapping[str, Any], bench=None) -> None:
    """Make every autotuner time its configs with ``bench`` (default ``graph_benchmarker()``).
    ``Autotuner.do_bench`` is a ``cached_property`` over the ``do_bench`` argument in Triton 3.6
    and 3.9, so the instance attribute set here is what ``Autotuner._bench`` calls."""
    bench = bench or graph_benchmarker()
    for at in autotuners.values():
        at.__dict__["do_bench"] = bench


def prepare_gpu_tuning() -> Committed:
    """On a CUDA GPU, for code that runs the kernels outside ``roofline bench`` (``e2e --full``'s
    Triton engine, scripts): the committed configs for this GPU and Triton applied, every other key
    tuned graph-timed. Returns what became of the committed file."""
    import torch
    import triton

    autotuners = discover_autotuners()
    gpu = torch.cuda.get_device_name()
    committed = load_committed(tuned_path(gpu, triton.__version__), autotuners, gpu, triton.__version__)
    apply_committed(committed, autotuners)  # and the choices
    use_graph_benchmarks(autotuners)
    return committed


# ------------------------------------------------------------------------------------------------
# which config ran
# ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    name: str
    key: tuple
    config: Any
    source: str  # "committed" | "autotuned" | "fixed"
    #: with ``pin_missing``: the configs the autotuner's own pruning (``prune_configs_by``) keeps
    #: for this call; None when not asked
    candidates: tuple | None = None


def pruned_configs(autotuner, args: tuple, meta: Mapping[str, Any]) -> tuple:
    """The configs the autotuner would time for this call: its ``prune_configs_by`` applied
    (``Autotuner.prune_configs`` reads ``nargs``, set here as ``run`` sets it); all of them when
    pruning fails or keeps none."""
    try:
        autotuner.nargs = dict(zip(autotuner.arg_names, args))
        kept = tuple(autotuner.prune_configs(dict(meta)))
    except Exception:  # noqa: BLE001 - a pruning function that wants more: time every config
        kept = ()
    finally:
        autotuner.nargs = None
    return kept or tuple(autotuner.configs)


_UNRECORDED = [0]


class unrecorded:
    """``with unrecorded():`` autotuner calls in the block are not recorded by an active
    ``Recorder`` (a launcher's own trial runs, as ``decode_attention``'s schedule choice, are not
    the config the case ran with)."""

    def __enter__(self):
        _UNRECORDED[0] += 1
        return self

    def __exit__(self, *exc) -> None:
        _UNRECORDED[0] -= 1


#: the active ``Recorder``s (``Choice`` records its calls with them)
_ACTIVE: list = []


def _record(call: Call) -> None:
    if not _UNRECORDED[0]:
        for rec in _ACTIVE:
            rec.calls.append(call)


class Recorder:
    """While active (``with Recorder(autotuners, committed):``), each autotuner call records a
    ``Call``, and so does each ``Choice`` read or made. ``pin_missing``: a key not yet in the cache gets the autotuner's first config instead
    of being tuned (``roofline tune`` finds the keys a case hits this way, without tuning)."""

    def __init__(self, autotuners: Mapping[str, Any], committed: Committed | None = None, pin_missing: bool = False) -> None:
        self.autotuners = dict(autotuners)
        self.committed = committed or Committed()
        self.pin_missing = pin_missing
        self.calls: list[Call] = []

    def _wrap(self, name: str, at):
        original = at.run

        def run(*args, **kwargs):
            if _UNRECORDED[0]:
                return original(*args, **kwargs)
            if len(at.configs) <= 1:
                out = original(*args, **kwargs)
                self.calls.append(Call(name, (), at.configs[0] if at.configs else None, "fixed"))
                return out
            meta = {k: v for k, v in kwargs.items() if k not in ("grid", "warmup")}
            key = call_key(at, args, meta)
            candidates = None
            if self.pin_missing:
                candidates = pruned_configs(at, args, meta)
                if key not in at.cache:
                    at.cache[key] = candidates[0]
            cfg_before = at.cache.get(key)
            keys_before = set(at.cache)
            out = original(*args, **kwargs)
            new_keys = [k for k in at.cache if k not in keys_before]
            if new_keys:  # Triton tuned a key just now (ours, or its own if it computes keys otherwise)
                key = key if key in new_keys else new_keys[0]
                self.calls.append(Call(name, key, at.cache[key], "autotuned", candidates))
                return out
            cfg = at.cache.get(key, getattr(at, "best_config", None))
            committed = cfg_before is not None and cfg is cfg_before and self.committed.is_committed(name, key, cfg)
            self.calls.append(Call(name, key, cfg, "committed" if committed else "autotuned", candidates))
            return out

        return run

    def __enter__(self) -> Recorder:
        for name, at in self.autotuners.items():
            at.run = self._wrap(name, at)  # an instance attribute: kernel[grid](...) calls self.run
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc) -> None:
        for at in self.autotuners.values():
            at.__dict__.pop("run", None)
        if self in _ACTIVE:
            _ACTIVE.remove(self)


def summarize_calls(calls: Iterable[Call]) -> tuple[dict[str, Any], str]:
    """(``ResultRow.config``, ``ResultRow.tuning``) from the calls of one case: config per
    autotuner name (``"<name> key=[...]"`` when one case calls it with several keys); tuning
    ``"autotuned"`` if any call ran a run-time-tuned config, else ``"committed"`` if any ran a
    committed one, else ``"fixed"`` (no autotuner, or single-config ones only)."""
    calls = list(calls)
    by_name: dict[str, dict[tuple, Call]] = {}
    for c in calls:
        by_name.setdefault(c.name, {})[c.key] = c
    config: dict[str, Any] = {}
    for name, keyed in by_name.items():
        for key, c in keyed.items():
            label = name if len(keyed) == 1 else f"{name} key={json.dumps(key_json(key))}"
            if isinstance(c.config, str):  # a Choice's value
                config[label] = {"value": c.config}
            else:
                config[label] = config_json(c.config) if c.config is not None else {}
    sources = {c.source for c in calls}
    tuning = "autotuned" if "autotuned" in sources else "committed" if "committed" in sources else "fixed"
    return config, tuning
