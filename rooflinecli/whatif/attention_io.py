"""FlashAttention vs standard attention HBM traffic (Dao et al., 2022, Theorem 2) on one GPU.

SRAM size M is the GPU's shared memory per SM in elements of the chosen dtype: one thread block of
the tiled kernel runs on one SM and holds its Q, K, V and O tiles there.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from rooflinecli import formulas
from rooflinecli.dtypes import bytes_per_element, check_dtype
from rooflinecli.errors import RooflineError
from rooflinecli.hardware import HardwareSpec


@dataclass(frozen=True)
class AttentionIO:
    hw: str
    seq_tokens: int
    head_dim: int
    heads: int
    batch: int
    dtype: str
    sram_bytes: float  # shared memory per SM
    sram_elements: float  # M
    block_cols: int  # B_c = ceil(M / 4D)
    block_rows: int  # B_r = min(B_c, D)
    kv_passes: int  # T_c = ceil(N / B_c): passes over Q and O
    naive_elements_per_head: float  # 4*N*D + 4*N^2
    flash_elements_per_head: float  # N*D + 2N + 2*N*D + T_c*(3*N*D + 4N)
    naive_bytes: float  # over all heads and sequences
    flash_bytes: float
    naive_over_flash: float
    naive_time_s: float  # at the GPU's HBM bandwidth
    flash_time_s: float
    memory_bandwidth_bytes_per_s: float

    def to_json(self) -> dict:
        return asdict(self)


def attention_io(
    spec: HardwareSpec, seq: int, head_dim: int, heads: int = 1, batch: int = 1, dtype: str = "bf16"
) -> AttentionIO:
    """HBM traffic of one attention forward over ``batch`` x ``heads`` heads of ``seq`` tokens."""
    for name, value in (("--seq", seq), ("--head-dim", head_dim), ("--heads", heads), ("--batch", batch)):
        if value < 1:
            raise RooflineError(f"{name} must be >= 1, got {value}")
    check_dtype(dtype, ("fp32", "bf16", "fp16", "fp8"), "attention dtype")
    b = bytes_per_element(dtype)
    sram_bytes = spec.smem_per_sm_bytes
    M = sram_bytes / b
    if M < 4 * head_dim:
        raise RooflineError(
            f"{spec.id}: shared memory per SM ({sram_bytes:.0f} bytes = {M:.0f} {dtype} elements) is below "
            f"4 x head dim ({4 * head_dim}); Theorem 2 needs d <= M"
        )
    B_c, B_r = formulas.flash_attention_block_sizes(head_dim, M)
    T_c = -(-seq // int(B_c))
    naive = float(formulas.naive_attention_hbm_elements(seq, head_dim))
    flash = float(formulas.flash_attention_hbm_elements(seq, head_dim, M))
    scale = b * heads * batch
    bw = spec.memory_bandwidth_bytes_per_s
    return AttentionIO(
        hw=spec.id,
        seq_tokens=int(seq),
        head_dim=int(head_dim),
        heads=int(heads),
        batch=int(batch),
        dtype=dtype,
        sram_bytes=float(sram_bytes),
        sram_elements=float(M),
        block_cols=int(B_c),
        block_rows=int(B_r),
        kv_passes=int(T_c),
        naive_elements_per_head=naive,
        flash_elements_per_head=flash,
        naive_bytes=naive * scale,
        flash_bytes=flash * scale,
        naive_over_flash=naive / flash,
        naive_time_s=float(formulas.memory_time_s(naive * scale, bw)),
        flash_time_s=float(formulas.memory_time_s(flash * scale, bw)),
        memory_bandwidth_bytes_per_s=bw,
    )
