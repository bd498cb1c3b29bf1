"""Engine profiles: which kernels an inference engine launches for one decoder layer, and how.

Data, not code: the step builder (``rooflinecli.achievable.step``) reads these fields. Kernel
counts are per layer. ``graph`` phases run inside one CUDA graph (each kernel costs at least the
graph floor); eager phases pay the host's cost of each torch call (its calibrated eager time)
when the host falls behind the GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rooflinecli.errors import RooflineError, unknown_name_error


@dataclass(frozen=True)
class EngineProfile:
    """How a serving engine runs a step: graphs, fusions and the kernels it picks."""

    name: str
    description: str
    decode_graph: bool  # decode steps replayed from a CUDA graph
    prefill_graph: bool  # prefill captured too (else eager)
    fuse_qkv: bool  # q, k, v projections as one GEMM
    fuse_gate_up: bool  # gate and up projections as one GEMM
    #: RMSNorm: "torch" (F.rms_norm, timed as such, or as rmsnorm_copy minus the copy) or
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
    #: routed MoE experts: "torch" (routing + torch._grouped_mm, ``kernels.moe_torch``: timed as
    #: the calibration's ``moe_grouped`` rows when it has them) or "fused" (a fused MoE kernel: the
    #: GEMM fit's form on the experts' FLOPs and bytes, within 15% of the project's Triton kernel
    #: at decode sizes on H200)
    moe_experts: str = "fused"
    #: what the engine's measured attention call includes besides attention itself ("kv_write":
    #: the new K and V written into the cache; "rope": RoPE on q and k, as TensorRT-LLM's QKV
    #: preprocessing): those kernels get no row of their own
    attention_includes: tuple[str, ...] = ()
    #: per-tensor fp8 GEMMs run with the checkpoint's static activation scale while the engine's
    #: measured fp8 GEMM rows were timed with dynamic scaling: each loses what dynamic scaling adds
    #: (the calibration's ``fp8_scale`` table, where it has one)
    fp8_static_scale: bool = False
    #: GEMMs whose input arrives already in fp8 (the kernel before them writes it): they also lose
    #: the quantize kernel (``fp8_quantize``)
    fp8_fed_gemms: tuple[str, ...] = ()
    #: model types whose tensor-parallel all-reduces carry the residual add and the next RMSNorm
    #: (and, for fp8, its quantization) in one kernel, for hidden sizes above
    #: ``allreduce_norm_fusion_above``: those norms get no kernel of their own, and the GEMMs they
    #: feed an fp8 input
    allreduce_norm_fusion: tuple[str, ...] = ()
    allreduce_norm_fusion_above: int = 0


def _serving(name: str, description: str, includes: tuple[str, ...]) -> EngineProfile:
    """A serving engine whose kernels were measured as such (its imported calibration's tables):
    fused add + RMSNorm, fused SiLU * mul, its attention call as measured (``includes``), decode
    in a CUDA graph, prefill eager (a few large kernels per layer: the host keeps up)."""
    return EngineProfile(name=name, description=description, decode_graph=True, prefill_graph=False, fuse_qkv=True, fuse_gate_up=True,
                         norm="fused", norm_kernels=1, residual_add_kernels=0, act="fused", act_kernels=1,
                         rope_kernels=0 if "rope" in includes else 1, kv_write_kernels=0, attention="table", attention_includes=includes)


ENGINES: dict[str, EngineProfile] = {
    "torch": EngineProfile(
        name="torch",
        description="each torch op is a kernel: F.rms_norm, separate residual adds, silu then mul, "
        "RoPE as mul/neg/cat/mul/add on q and on k, K and V copied into the cache, SDPA attention, "
        "MoE experts through torch._grouped_mm; "
        "decode in one CUDA graph, prefill eager",
        decode_graph=True,
        prefill_graph=False,
        fuse_qkv=True,
        fuse_gate_up=True,
        norm="torch",
        # F.rms_norm on CUDA (torch 2.11) is one fused kernel: its eager call costs 17.9 us of host
        # time on H200, an add_ 13.1 us, a five-kernel RoPE 53 us; its GPU
        # time (4.2 us at one row of 4096, 7.0 us at 8192) comes from its own calibration rows
        norm_kernels=1,
        residual_add_kernels=2,
        act="torch",
        act_kernels=2,
        rope_kernels=10,
        kv_write_kernels=2,
        attention="sdpa",
        # rope(q).transpose(0, 1)[None] goes to SDPA as a strided view (flash, cuDNN and the
        # efficient kernel take any layout with a unit last stride) and the output, laid out
        # [B, S, H, D] by those kernels, is reshaped back without a copy: no layout copies
        prefill_layout_copies=0,
        moe_experts="torch",
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
    "vllm": _serving("vllm", "vLLM's kernels as measured: torch linear / CUTLASS fp8 GEMMs, FlashAttention calls that include the "
                     "KV-cache write, custom all-reduce; fused norm and SiLU*mul", ("kv_write",)),
    "sglang": _serving("sglang", "SGLang's kernels as measured: GEMMs, FlashInfer / FA3 attention calls that include the KV-cache "
                       "write, custom all-reduce; fused norm and SiLU*mul", ("kv_write",)),
    # TensorRT-LLM's PyTorch backend (tensorrt_llm/_torch): ``FP8QDQLinearMethod`` quantizes with the
    # checkpoint's input_scale (per-tensor fp8 checkpoints are ModelOpt's, which ship one) and only
    # falls back to dynamic scaling without it, as the collector's Linear (no input_scale) ran; the
    # attention op writes fp8 for an fp8 o_proj (``out_scale``) and GatedMLP's swiglu for an fp8
    # down_proj (``quant_scale``); ``LlamaDecoderLayer`` fuses each TP all-reduce with the residual
    # add, the next RMSNorm and its fp8 quantization (``AllReduceFusionOp.RESIDUAL_RMS_NORM_QUANT_FP8``)
    # for hidden sizes above 4,096 (``TRTLLM_LLAMA_EAGER_FUSION_DISABLED`` turns it off)
    "trtllm": replace(
        _serving("trtllm", "TensorRT-LLM's kernels as measured: GEMMs, attention calls that include the QKV preprocessing "
                 "(RoPE and the KV-cache write), custom all-reduce (Llama: with the residual add and RMSNorm); fused norm and SiLU*mul; "
                 "static fp8 activation scales", ("rope", "kv_write")),
        fp8_static_scale=True, fp8_fed_gemms=("attn.o", "mlp.down"), allreduce_norm_fusion=("llama",), allreduce_norm_fusion_above=4096),
}


def get_engine(name: str) -> EngineProfile:
    try:
        return ENGINES[name]
    except KeyError:
        raise unknown_name_error("engine", name, ENGINES) from None
