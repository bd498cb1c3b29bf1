"""Ceiling sets: the peaks and bandwidths a roofline is drawn against, in one place.

Three sets, each with its own ridge point, named where they are printed:

- **datasheet** (``datasheet_spec``): the vendor's figures. A measured spec's datasheet is its
  base spec; a datasheet spec is its own.
- **measured roof** (``measured_roof_spec``): a measured spec's sustained compute peaks with its
  HBM bandwidth raised to the fastest stream measured on that GPU: the spec's own (sustained copy),
  the memory entries of ``[measured_with]`` (burst copy, read-only stream) and the calibration's
  fastest memory-bound row, each only up to the datasheet's bandwidth (a figure above it is a
  mistimed row, not HBM). Reads outrun copies, so a roof on the copy alone would sit above some
  achievable times; with this one every achievable time is at least its roof. The roof of the
  ``measured-roof`` and ``achievable`` modes.
- **fastest measured** (``fastest_spec``): the measured roof with the burst compute peaks (single
  launches before the clocks settle) as well: what a measured kernel must not beat, so a point
  above it is a counting error.

``bound_spec`` and ``measured_peer`` read a measured spec's ``[measured_with]`` table; a
calibration's streams (``achievable.fit.stream_rates``: (bytes/s, row) pairs, fastest first) are
passed in, so this module needs nothing above ``hardware``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec, get_spec
from rooflinecli.hardware.schema import BOUND_ENTRIES

#: (bytes/s, which row) pairs of a calibration's memory-bound rows, fastest first
Streams = Sequence[tuple[float, str]]


def datasheet_spec(spec: HardwareSpec) -> HardwareSpec:
    """The datasheet figures of ``spec``: a measured spec's base (itself when the base does not
    load or it has none), any other spec as it is."""
    if spec.kind != "measured" or not spec.base:
        return spec
    try:
        return get_spec(spec.base)
    except RooflineError:
        return spec


def _datasheet_bandwidth_gb_per_s(spec: HardwareSpec) -> float | None:
    """The HBM bandwidth of a measured spec's datasheet base, or None (no base, or one that does not load)."""
    base = datasheet_spec(spec)
    return None if base is spec else base.memory_bandwidth_gb_per_s


def measured_peer(spec: HardwareSpec, dtype: str) -> tuple[str, HardwareSpec] | None:
    """(peer, base spec) for a dense peak a measured spec does not measure but derives from a
    measured dtype of the same datasheet figure (``hardware.schema.peak_peer``: int8 from fp8 on
    Hopper); None for a measured peak, a datasheet spec, or no such peer."""
    if not spec.base or f"peak_dense_tflops.{dtype}" in spec.measured_keys:
        return None
    from rooflinecli.hardware.schema import peak_peer

    base = datasheet_spec(spec)
    if base is spec:
        return None
    measured = [k.split(".", 1)[1] for k in spec.measured_keys if k.startswith("peak_dense_tflops.")]
    peer = peak_peer(base.peak_dense_tflops, measured, dtype)
    return (peer, base) if peer is not None else None


def _positive(spec: HardwareSpec, entry: str) -> float | None:
    try:
        v = float(spec.measured_with.get(entry, "nan"))
    except (TypeError, ValueError):
        return None
    return v if v > 0 and math.isfinite(v) else None


def bound_spec(spec: HardwareSpec) -> HardwareSpec:
    """``spec`` with the fastest ceilings its ``[measured_with]`` table names: the burst peaks (20
    single launches, before the clocks settle) and the higher of the copy bandwidth and the
    read-only bandwidth (a stream of reads beats a copy's read + write mix). A spec without such
    entries, or with entries that are not positive numbers, comes back as is."""
    peaks = dict(spec.peak_dense_tflops)
    bw = spec.memory_bandwidth_gb_per_s
    for entry, what in BOUND_ENTRIES:
        v = _positive(spec, entry)
        if v is None:
            continue
        if what == "memory":
            bw = max(bw, v)
        elif what in peaks:
            peaks[what] = max(peaks[what], v)
    for dt in list(peaks):  # a peak the spec derives from a measured peer (int8 from fp8) takes the peer's burst too
        found = measured_peer(spec, dt)
        if found is None:
            continue
        peer, base = found
        burst = _positive(spec, f"burst peak_dense_tflops.{peer}")
        if burst is not None:
            peaks[dt] = max(peaks[dt], burst * base.peak_dense_tflops[dt] / base.peak_dense_tflops[peer])
    if bw == spec.memory_bandwidth_gb_per_s and peaks == dict(spec.peak_dense_tflops):
        return spec
    return replace(spec, peak_dense_tflops=peaks, memory_bandwidth_gb_per_s=bw)


def fastest_stream(streams: Streams, ceiling_bytes_per_s: float = float("inf")) -> tuple[float, str]:
    """(bytes/s, which row) of the fastest of ``streams`` (fastest first) at or under
    ``ceiling_bytes_per_s`` (a datasheet's bandwidth: a row over it did not stream from HBM, or
    was mistimed); (0, "") if none."""
    return next(((bw, where) for bw, where in streams if bw <= ceiling_bytes_per_s), (0.0, ""))


def measured_roof_bandwidth(spec: HardwareSpec, streams: Streams = ()) -> tuple[float, str]:
    """(GB/s, where it comes from in words) of the measured roof's HBM bandwidth."""
    cap = _datasheet_bandwidth_gb_per_s(spec)
    if cap is None:  # nothing to tell a real stream from a mistimed row: the spec's own figure
        return spec.memory_bandwidth_gb_per_s, "the spec's bandwidth"
    best, where = spec.memory_bandwidth_gb_per_s, "the spec's bandwidth"
    measured = bound_spec(spec).memory_bandwidth_gb_per_s
    if best < measured <= cap:
        best, where = measured, "fastest measured ceiling in [measured_with]"
    stream_bw, stream_row = fastest_stream(streams, cap * 1e9)
    if stream_bw / 1e9 > best:
        best, where = stream_bw / 1e9, f"fastest calibration stream, {stream_row}"
    over = sum(1 for bw, _ in streams if bw / 1e9 > cap)
    if over:
        where += f"; {over} calibration row(s) over the datasheet's {cap:,.0f} GB/s left out"
    return best, where


def measured_roof_spec(spec: HardwareSpec, streams: Streams = ()) -> HardwareSpec:
    """The measured roof's ceilings (see the module's docstring); a datasheet spec as it is."""
    bw, _ = measured_roof_bandwidth(spec, streams)
    if bw <= spec.memory_bandwidth_gb_per_s:
        return spec
    return replace(spec, memory_bandwidth_gb_per_s=bw)


def fastest_spec(spec: HardwareSpec, streams: Streams = ()) -> HardwareSpec:
    """The fastest measured ceilings: ``bound_spec``'s burst peaks, HBM at the measured roof's bandwidth."""
    return measured_roof_spec(bound_spec(spec), streams)


__all__ = [
    "Streams",
    "bound_spec",
    "datasheet_spec",
    "fastest_spec",
    "fastest_stream",
    "measured_peer",
    "measured_roof_bandwidth",
    "measured_roof_spec",
]
