"""Engine profiles: which kernels an inference engine launches for one decoder layer, and how.

Data, not code: the step builder (``rooflinecli.achievable.step``) reads these fields. Kernel
counts are per layer. ``graph`` phases run inside one CUDA graph (each kernel costs at least the
graph floor); eager phases pay the host's launch cost per kernel when it exceeds the GPU time.
"""

from __future__ import annotations

from dataclasses import dataclass

from rooflinecli.errors import RooflineError, unknown_name_error


@dataclass(frozen=True)
class EngineProfile:
    name: str
    description: str
    decode_graph: bool  # decode steps replayed from a CUDA graph
    prefill_graph: bool  # prefill captured too (else eager)
    fuse_qkv: bool  # q, k, v projections as one GEMM
    fuse_gate_up: bool  # gate and up projections as one GEMM
    #: RMSNorm: "torch" (F.rms_norm: several kernels, timed as rmsnorm_copy minus the copy) or
    #: "fused" (one kernel at the copy kernel's bandwidth, the residual add folded in)
    norm: str
    norm_kernels: int  # kernels of one norm
    residual_add_kernels: int  # separate residual-add kernels per layer (0: fused into the norm)
    #: SiLU(gate) * up: "torch" (silu then mul, timed as silu_mul) or "fused" (one kernel)
    act: str
    act_kernels: int
    rope_kernels: int  # RoPE on q and k
    kv_write_kernels: int  # writes of the new K and V into the cache (0: fused into RoPE)
    attention: str  # "sdpa" (torch SDPA: cuDNN / flash prefill, flash-decoding)
    #: prefill: copies between the token-major layout of the projections and SDPA's head-major one
    #: (q made contiguous as [B, H, S, D], the output back to [S, H*D])
    prefill_layout_copies: int = 0


ENGINES: dict[str, EngineProfile] = {
    "torch": EngineProfile(
        name="torch",
        description="each torch op is a kernel: F.rms_norm, separate residual adds, silu then mul, "
        "RoPE as mul/neg/cat/mul/add on q and on k, K and V copied into the cache, SDPA attention; "
        "decode in one CUDA graph, prefill eager",
        decode_graph=True,
        prefill_graph=False,
        fuse_qkv=True,
        fuse_gate_up=True,
        norm="torch",
        # F.rms_norm in torch 2.11 eager: about 5 kernels (pow, mean, add+rsqrt, mul, mul by the
        # weight): 6.1 us at 1 token in a graph, where one tiny kernel costs 1.0 us
        norm_kernels=5,
        residual_add_kernels=2,
        act="torch",
        act_kernels=2,
        rope_kernels=10,
        kv_write_kernels=2,
        attention="sdpa",
        prefill_layout_copies=2,
    ),
    "fused": EngineProfile(
        name="fused",
        description="vLLM / SGLang style: fused add+RMSNorm, fused SiLU*mul, fused RoPE + KV-cache "
        "write, flash attention; decode in one CUDA graph, prefill eager",
        decode_graph=True,
        prefill_graph=False,
        fuse_qkv=True,
        fuse_gate_up=True,
        norm="fused",
        norm_kernels=1,
        residual_add_kernels=0,
        act="fused",
        act_kernels=1,
        rope_kernels=1,
        kv_write_kernels=0,
        attention="sdpa",
    ),
}

MODES: tuple[str, ...] = ("roof", "achievable")


def get_engine(name: str) -> EngineProfile:
    try:
        return ENGINES[name]
    except KeyError:
        raise unknown_name_error("engine", name, ENGINES) from None


def check_mode(mode: str, option: str = "--mode") -> str:
    if mode not in MODES:
        raise RooflineError(f"{option}: unknown mode '{mode}'; known: {', '.join(MODES)}")
    return mode
