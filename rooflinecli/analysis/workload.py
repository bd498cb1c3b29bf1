"""The workload: what is run (batch, prompt, generation), in which dtypes, on how many GPUs, and
which corrections to the pure datasheet roofline apply."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from rooflinecli.dtypes import (
    BYTES_PER_ELEMENT,
    COMPUTE_DTYPES,
    WEIGHT_DTYPES,
    check_dtype,
    kv_bytes_per_element,
)
from rooflinecli.errors import RooflineError

#: Op kinds that take an efficiency (``--efficiency gemm=0.8,attention=0.7``). Communication ops
#: ("comm") are timed from the link bandwidth alone.
OP_KINDS: tuple[str, ...] = ("gemm", "attention", "elementwise", "moe")

#: Default prefill chunk (tokens) the activation workspace is sized for (``Workload.prefill_chunk_tokens``).
DEFAULT_PREFILL_CHUNK_TOKENS = 8192

#: MLA decode forms: "absorbed" attends over the latent cache (W_UK folded into the query, W_UV
#: applied after attention); "naive" up-projects every cached latent to per-head K and V each step.
MLA_DECODE_FORMS: tuple[str, ...] = ("absorbed", "naive")

#: the smallest --efficiency taken: 1,000x the roofline time (1e-300 printed a TTFT of 1.6e298 s)
MIN_EFFICIENCY = 1e-3


@dataclass(frozen=True)
class Workload:
    """One inference workload. Every field has the pure-datasheet default (efficiency 1.0, no
    overheads). ``batch`` sequences of ``prompt_len`` tokens are prefilled, then ``gen_len`` decode
    steps run at contexts ``prompt_len .. prompt_len + gen_len - 1``."""

    batch: int
    prompt_len: int
    gen_len: int
    compute_dtype: str = "bf16"
    weight_dtype: str = "bf16"
    #: a checkpoint with a ``quantization_config`` is read as it stores its weights unless this is
    #: True (the user gave --weight-dtype): then ``weight_dtype`` replaces the checkpoint's format
    weight_dtype_overrides: bool = False
    kv_dtype: str = "bf16"
    kv_bits: float | None = None  # overrides kv_dtype: any width in bits (e.g. 3 or 4.5)
    weight_group_size: int = 128  # int4 weights: one 2-byte scale per group
    tp: int = 1  # tensor parallel degree
    ep: int = 1  # expert parallel degree (MoE models)
    #: efficiency per op kind ("gemm", "attention", "elementwise", "moe"); missing kinds: 1.0
    efficiency: Mapping[str, float] = field(default_factory=dict)
    launch_overhead_s: float = 0.0  # fixed cost per kernel launch (one per op per layer)
    expert_skew: float = 1.0  # >= 1: routing imbalance (formulas.expected_experts_touched)
    kv_block_size: int | None = None  # paged KV cache: tokens per block
    price_per_gpu_hour: float | None = None  # USD
    mla_decode: str = "absorbed"  # "absorbed" | "naive" (MLA models only)
    #: memory only: engines prefill in chunks of at most this many tokens (vLLM's default token
    #: budget is of this order), so the activation workspace is sized for one chunk; None sizes it
    #: for the whole unchunked prefill. Prefill *time* is modelled unchunked either way.
    prefill_chunk_tokens: int | None = DEFAULT_PREFILL_CHUNK_TOKENS
    #: the prediction's mode and engine, read by ``rooflinecli.predict`` only (the roofline here
    #: knows neither): "datasheet", "measured-roof", "achievable" or "roof"; None: achievable where
    #: the spec is calibrated for the engine, else the roof of the spec's own kind
    mode: str | None = None
    engine: str | None = None  # the engine profile (``achievable.ENGINES``); None: the spec's default
    #: tokens each sequence runs through one decode step: 1, or k + 1 for the verification pass
    #: of speculative decoding / MTP (k drafts and the token after them), which reads the weights
    #: and the KV cache once for all of them
    decode_tokens: int = 1

    # ---- derived -------------------------------------------------------------------------------
    @property
    def kv_bytes_per_element(self) -> float:
        return kv_bytes_per_element(self.kv_dtype, self.kv_bits)

    @property
    def act_bytes_per_element(self) -> float:
        """Activations between kernels: fp32 for fp32/tf32 compute, else 16-bit (fp8 and int
        GEMMs read quantized inputs but write 16-bit outputs; we count 16-bit traffic)."""
        return 4.0 if self.compute_dtype in ("fp32", "tf32", "fp64") else 2.0

    @property
    def unquantized_weight_bytes_per_element(self) -> float:
        """Embedding, LM head, router and norm weights stay 16-bit (32-bit for fp32 runs)."""
        return 4.0 if self.weight_dtype == "fp32" else 2.0

    @property
    def num_gpus(self) -> int:
        """GPUs of one model replica: max(tp, ep). With ep > tp, attention runs data-parallel
        over ep/tp groups (each GPU attends for batch*tp/ep sequences)."""
        return max(self.tp, self.ep)

    @property
    def attention_dp(self) -> int:
        return self.num_gpus // self.tp

    def seqs_per_gpu(self, batch):
        """Sequences the busiest data-parallel attention group attends for: whole sequences,
        ceil(batch / attention_dp) (a sequence's KV cache lives on one group; a batch smaller
        than the groups leaves some idle). ``batch`` itself without attention DP."""
        b = np.asarray(batch, dtype=float)
        return b if self.attention_dp == 1 else np.ceil(b / self.attention_dp)

    def efficiency_for(self, kind: str) -> float:
        return float(self.efficiency.get(kind, 1.0))

    @property
    def kv_label(self) -> str:
        return f"{self.kv_bits:g}-bit" if self.kv_bits is not None else self.kv_dtype


def validate_workload(wl: Workload) -> Workload:
    """Raise a one-line RooflineError for any bad field (names the CLI option)."""

    def whole(value, option: str, minimum: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise RooflineError(f"{option} must be a whole number >= {minimum}, got {value!r}")

    whole(wl.batch, "--batch", 1)
    whole(wl.prompt_len, "--prompt", 1)
    whole(wl.gen_len, "--gen", 1)
    whole(wl.tp, "--tp", 1)
    whole(wl.ep, "--ep", 1)
    whole(wl.weight_group_size, "--weight-group-size", 1)
    whole(wl.decode_tokens, "decode tokens per sequence", 1)
    if wl.kv_block_size is not None:
        whole(wl.kv_block_size, "--kv-block-size", 1)
    if wl.prefill_chunk_tokens is not None and (isinstance(wl.prefill_chunk_tokens, bool) or not isinstance(wl.prefill_chunk_tokens, int) or wl.prefill_chunk_tokens < 1):
        raise RooflineError(f"--prefill-chunk must be a whole number of tokens >= 1, or 0 for an unchunked prefill; got {wl.prefill_chunk_tokens!r}")
    check_dtype(wl.compute_dtype, COMPUTE_DTYPES, "compute dtype (--dtype)")
    check_dtype(wl.weight_dtype, WEIGHT_DTYPES, "weight dtype (--weight-dtype)")
    wl.kv_bytes_per_element  # validates --kv-dtype / --kv-bits
    if wl.tp % wl.ep and wl.ep % wl.tp:
        raise RooflineError(f"--tp {wl.tp} and --ep {wl.ep}: one must divide the other")
    for kind, value in wl.efficiency.items():
        if kind not in OP_KINDS:
            raise RooflineError(f"--efficiency: unknown op kind '{kind}'; known: {', '.join(OP_KINDS)}")
        if not MIN_EFFICIENCY <= value <= 1.0:
            raise RooflineError(f"--efficiency {kind}={value}: must be in [{MIN_EFFICIENCY:g}, 1]")
    if not wl.launch_overhead_s >= 0.0:
        raise RooflineError(f"--launch-overhead-us must be >= 0, got {wl.launch_overhead_s * 1e6:g}")
    if not wl.expert_skew >= 1.0:
        raise RooflineError(f"--expert-skew must be >= 1 (1 = uniform routing), got {wl.expert_skew}")
    if wl.price_per_gpu_hour is not None and not wl.price_per_gpu_hour >= 0.0:
        raise RooflineError(f"--price-per-gpu-hour must be >= 0, got {wl.price_per_gpu_hour}")
    if wl.mla_decode not in MLA_DECODE_FORMS:
        raise RooflineError(f"MLA decode form must be one of {', '.join(MLA_DECODE_FORMS)}, got '{wl.mla_decode}'")
    return wl


def parse_efficiency(text: str | None) -> dict[str, float]:
    """``--efficiency`` text: one number for every op kind ("0.8") or ``kind=value`` pairs
    ("gemm=0.8,attention=0.7"). Errors name the option and the bad item."""
    if text is None or not text.strip():
        return {}
    text = text.strip()

    def number(item: str) -> float:
        try:
            value = float(item)
        except ValueError:
            raise RooflineError(f"--efficiency: '{item}' is not a number (use 0.8 or gemm=0.8,attention=0.7)") from None
        if not MIN_EFFICIENCY <= value <= 1.0:
            raise RooflineError(f"--efficiency: {item} must be in [{MIN_EFFICIENCY:g}, 1]")
        return value

    if "=" not in text:
        value = number(text)
        return {kind: value for kind in OP_KINDS}
    out: dict[str, float] = {}
    for item in text.split(","):
        if not item.strip():
            continue
        kind, sep, value = item.partition("=")
        kind = kind.strip()
        if not sep or kind not in OP_KINDS:
            raise RooflineError(f"--efficiency: bad item '{item.strip()}'; use kind=value with kind in {', '.join(OP_KINDS)}")
        out[kind] = number(value.strip())
    return out


__all__ = ["BYTES_PER_ELEMENT", "MLA_DECODE_FORMS", "OP_KINDS", "Workload", "parse_efficiency", "validate_workload"]
