"""The run's environment: GPU, driver, CUDA, torch, triton, clocks, date; and the GPU name ->
datasheet spec id match (``"NVIDIA H200"`` -> ``h200``)."""

from __future__ import annotations

import datetime as _dt
import platform
import shutil
import subprocess
from typing import Any

from rooflinecli.errors import RooflineError

NO_GPU_MESSAGE = (
    "no CUDA GPU found; `roofline {cmd}` times kernels on a CUDA GPU (torch.cuda.is_available() is False)"
)

#: (substrings that must all appear in the lower-cased GPU name, spec id), first match wins
GPU_NAME_RULES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("h200",), "h200"),
    (("h100", "pcie"), "h100-pcie"),
    (("h100", "nvl"), ""),  # H100 NVL: 94 GB at 3.9 TB/s, no datasheet spec here
    (("h100",), "h100-sxm"),  # "NVIDIA H100 80GB HBM3" is the SXM part
    (("a100", "pcie"), ""),
    (("a100",), "a100-sxm"),
    (("b200",), "b200"),
    (("l40s",), "l40s"),
    (("4090",), "rtx-4090"),
    (("mi300x",), "mi300x"),
)


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def match_spec_id(gpu_name: str, known: set[str] | None = None) -> str | None:
    """The datasheet spec id for a GPU name as the driver reports it, or None.

    ``known``: the ids that exist (default: the built-in specs); a rule whose id is not among them
    gives None rather than a wrong spec.
    """
    name = gpu_name.lower()
    for needles, spec_id in GPU_NAME_RULES:
        if all(n in name for n in needles):
            if not spec_id:
                return None
            if known is None:
                from rooflinecli.hardware import builtin_specs

                known = set(builtin_specs())
            return spec_id if spec_id in known else None
    return None


def has_cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


def require_cuda(cmd: str) -> None:
    """One-line error (exit 2 through the CLI) when no CUDA GPU is there."""
    if not has_cuda():
        raise RooflineError(NO_GPU_MESSAGE.format(cmd=cmd))


def nvidia_smi_query() -> dict[str, Any]:
    """Driver and clocks from ``nvidia-smi --query-gpu`` (empty when nvidia-smi is absent)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return {}
    fields = {
        "driver": "driver_version",
        "sm_clock_mhz": "clocks.sm",
        "mem_clock_mhz": "clocks.mem",
        "sm_clock_max_mhz": "clocks.max.sm",
        "mem_clock_max_mhz": "clocks.max.mem",
        "power_limit_w": "power.limit",
        "temperature_c": "temperature.gpu",
        "pstate": "pstate",
    }
    try:
        out = subprocess.run(
            [exe, f"--query-gpu={','.join(fields.values())}", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if out.returncode != 0:
        return {}
    values = [v.strip() for v in out.stdout.strip().splitlines()[0].split(",")] if out.stdout.strip() else []
    info: dict[str, Any] = {}
    for (key, _), value in zip(fields.items(), values):
        if value in ("", "[N/A]", "N/A", "[Not Supported]"):
            continue
        try:
            info[key] = float(value) if key != "driver" and key != "pstate" else value
        except ValueError:
            info[key] = value
    return info


def collect_environment(device: str = "cuda") -> dict[str, Any]:
    """GPU name, driver, CUDA, torch, triton, python, SM/memory clocks (nvidia-smi) and the date."""
    import torch

    env: dict[str, Any] = {
        "date_utc": utc_now(),
        "device": device,
        "python": platform.python_version(),
        "torch": torch.__version__,
        "host": platform.node(),
    }
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        env["triton"] = None
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(
            gpu_name=torch.cuda.get_device_name(0),
            cuda=torch.version.cuda,
            compute_capability=f"{props.major}.{props.minor}",
            sm_count=props.multi_processor_count,
            memory_gb=round(props.total_memory / 1e9, 1),
            l2_size_mb=round(int(getattr(props, "L2_cache_size", 0) or 0) / 2**20, 1),
        )
        env.update(nvidia_smi_query())
    else:
        env.update(gpu_name="cpu (Triton interpreter)", cuda=None, cpu=platform.processor() or platform.machine())
    return env
