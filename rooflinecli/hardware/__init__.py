"""Hardware specs: TOML files under ``hardware_specs/`` -> frozen ``HardwareSpec`` dataclasses.

The package's front door; its modules import one way: ``spec`` (the dataclasses) <- ``schema``
(a parsed file -> ``HardwareSpec``, the base resolver passed in) and ``plausible`` (ranges in both
directions, cross-field rules) <- ``loader`` (finding files, resolving bases, ids).

Every figure lives in a spec file with its source; no peak number is written in Python. A spec may
be named by id (``h100-sxm``) or given by path (``my-gpu.toml``) anywhere a GPU is accepted.
Measured specs (``hardware_specs/measured/*.toml``, written by ``roofline calibrate``) name a
datasheet spec as ``base`` and override the ceilings they measured.

File layout (every number carries its unit in its key)::

    id = "h100-sxm"
    name = "NVIDIA H100 SXM5 80GB"
    vendor = "nvidia"
    kind = "datasheet"                 # or "measured"
    estimates = ["cache.l2_bandwidth_gb_per_s"]   # dotted keys whose figure is an estimate

    [peak_dense_tflops]                # dense (no sparsity), TFLOP/s (TOP/s for int types)
    fp64 = 33.5
    bf16 = 989.4
    ...
    [memory]
    type = "HBM3"
    capacity_gb = 80
    bandwidth_gb_per_s = 3350
    [cache]
    l2_size_mb = 50
    l2_bandwidth_gb_per_s = 12000
    smem_per_sm_kb = 228
    smem_bandwidth_gb_per_s = 33454    # optional: all SMs (estimate: 128 B/clk/SM x 132 x 1.98 GHz)
    [compute]
    sm_count = 132                     # CUs on AMD
    boost_clock_mhz = 1980
    [interconnect]
    gpu_link_gb_per_s = 900            # NVLink / Infinity Fabric, per GPU, all links, both ways
    pcie_gb_per_s = 128
    [power]
    tdp_w = 700
    [[sources]]
    title = "NVIDIA H100 Tensor Core GPU Datasheet"
    url = "https://..."
    note = "tensor figures printed with sparsity; halved"
"""

from rooflinecli.hardware.spec import GB, TB, HardwareSpec, Source
from rooflinecli.hardware.loader import (
    MAX_SPEC_FILE_BYTES,
    all_specs,
    builtin_ids,
    builtin_spec,
    builtin_specs,
    get_spec,
    get_specs,
    is_spec_path,
    load_spec_file,
    load_spec_files,
    load_user_spec,
    measured_specs,
    parse_spec,
    read_spec_toml,
    resolve_base,
    specs_dir,
)

__all__ = [
    "GB",
    "MAX_SPEC_FILE_BYTES",
    "TB",
    "HardwareSpec",
    "Source",
    "all_specs",
    "builtin_ids",
    "builtin_spec",
    "builtin_specs",
    "get_spec",
    "get_specs",
    "is_spec_path",
    "load_spec_file",
    "load_spec_files",
    "load_user_spec",
    "measured_specs",
    "parse_spec",
    "read_spec_toml",
    "resolve_base",
    "specs_dir",
]
