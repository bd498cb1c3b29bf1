"""A checkpoint's ``quantization_config``: how its weights are stored, which layers are left out,
and the compute dtype the format implies.

Formats read (``quant_method``): ``gptq``, ``awq``, ``compressed-tensors``, ``fbgemm_fp8``, ``fp8``
(fine-grained, ``weight_block_size``), ``bitsandbytes`` (4- and 8-bit), ``mxfp4`` and ``modelopt``
(NVFP4 and FP8). Bytes of one stored d_in -> d_out matrix (``formulas.quantized_matrix_bytes``):

- data: d_in*d_out*bits/8;
- scales: one per ``group_in`` input elements and ``group_out`` output rows, ``scale_bytes`` each
  (group g: (g, 1); per channel: (d_in, 1); per tensor: (d_in, d_out); a 128x128 block: (128, 128));
- zero points (asymmetric formats): one per scale, ``zero_bits`` each.

What each format stores per scale:

| format | weights | scale | zero point |
|---|---|---|---|
| gptq | 4 or 8 bits | fp16 per group (``group_size``; -1: per output channel) | ``bits`` per group (qzeros, stored even when ``sym``) |
| awq | 4 bits | fp16 per group | 4 bits per group when ``zero_point`` |
| compressed-tensors | ``num_bits`` int or float | bf16 per tensor / channel / group / block | ``num_bits`` when not ``symmetric`` |
| fbgemm_fp8 | fp8 | fp32 per output channel | none |
| fp8 | fp8 | fp32 per ``weight_block_size`` block (per tensor without one) | none |
| bitsandbytes 4-bit | nf4 / fp4 | fp32 absmax per 64 (double quant: 8-bit absmax + fp32 per 256 of them) | none |
| bitsandbytes 8-bit | int8 | fp32 per output row | none |
| mxfp4 | fp4 (e2m1) | e8m0 (1 byte) per 32 | none |
| modelopt NVFP4 | fp4 (e2m1) | fp8 per 16 (plus one fp32 per tensor) | none |
| modelopt FP8 | fp8 | fp32 per tensor | none |

Which matrices a format converts: the decoder's attention and MLP / expert projections, minus the
excluded modules (``modules_to_not_convert``, ``ignore``, ``exclude_modules``, bitsandbytes'
``llm_int8_skip_modules``); the LM head only where the format converts every Linear and does not
exclude it (compressed-tensors, modelopt; GPTQ with ``lm_head: true``). Embedding tables, norms and
MoE routers stay 16-bit. A pattern matches a module name exactly, as a dotted suffix
(``lm_head``, ``self_attn.o_proj``), as a parent (``model.layers.*.self_attn``), as a glob with
``*``, as a longer path ending in the module's (a multimodal checkpoint's
``language_model.model.layers.0.mlp``), or as a regular expression after ``re:``. Module names
follow each layout (``params.module_name``: Phi-3's fused ``qkv_proj``, Falcon's
``query_key_value``, GPT-NeoX's ``gpt_neox.layers.N``, ...).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from rooflinecli import formulas
from rooflinecli.errors import RooflineError, unknown_name_error

QUANT_METHODS: tuple[str, ...] = ("awq", "bitsandbytes", "compressed-tensors", "fbgemm_fp8", "fp8", "gptq", "modelopt", "mxfp4")



@dataclass(frozen=True)
class WeightQuant:
    """How a checkpoint stores its converted weight matrices (see the module docstring)."""

    method: str  # one of QUANT_METHODS
    weight_dtype: str  # "int4", "int8", "fp8", "fp4", "nf4"
    bits: int
    group_in: int | None  # input elements per scale; None: all of d_in (per channel or per tensor)
    group_out: int | None  # output rows per scale; None: all of d_out (per tensor)
    scale_bytes: float
    zero_bits: int = 0  # bits of one zero point (0: symmetric)
    compute_dtype: str = "bf16"  # what the GEMMs run in: "bf16" for weight-only formats, "fp8"/"fp4"/"int8" for W8A8 / W4A4
    compute_note: str = ""
    excluded: tuple[str, ...] = ()  # module patterns as the config gives them
    lm_head: bool = False  # the format converts the LM head (unless excluded)
    label: str = ""  # "gptq int4, group 128, fp16 scales, 4-bit zero points"
    #: the KV-cache dtype the checkpoint is calibrated for (modelopt ``kv_cache_quant_algo``,
    #: compressed-tensors ``kv_cache_scheme``); shown, not applied: the KV figures follow --kv-dtype
    kv_cache_dtype: str | None = None

    def matrix_bytes(self, d_in: int, d_out: int) -> float:
        """Stored bytes of one converted d_in -> d_out matrix: data, scales and zero points."""
        return formulas.quantized_matrix_bytes(
            d_in, d_out, self.bits, self.group_in or d_in, self.group_out or d_out, self.scale_bytes, self.zero_bits
        )

    def bytes_per_param(self, d_in: int, d_out: int) -> float:
        return self.matrix_bytes(d_in, d_out) / (d_in * d_out)

    def is_excluded(self, module: str) -> bool:
        return any(_matches(p, module) for p in self.excluded)


def _matches(pattern: str, module: str) -> bool:
    """``pattern`` names ``module`` or one of its parents (see the module docstring)."""
    if pattern.startswith("re:"):
        return re.match(pattern[3:], module) is not None  # as compressed-tensors matches its targets
    parts = module.split(".")
    for end in range(len(parts), 0, -1):  # the module itself, then each parent
        name = ".".join(parts[:end])
        for start in range(end):  # the full name, then each dotted suffix
            tail = ".".join(parts[start:end])
            if tail == pattern or ("*" in pattern and fnmatchcase(tail, pattern)):
                return True
        if pattern.endswith("." + name):  # a longer path to the same module ("language_model.model.layers.0.mlp")
            return True
    return False


# ------------------------------------------------------------------------------------------------
# Parsing
# ------------------------------------------------------------------------------------------------


class _Q:
    """Typed access to ``quantization_config`` fields; errors name the file and the field."""

    def __init__(self, raw: dict, where: str, prefix: str = "quantization_config."):
        self.raw, self.where, self.prefix = raw, where, prefix

    def fail(self, key: str, what: str) -> RooflineError:
        return RooflineError(f"{self.where}: field '{self.prefix}{key}' {what}")

    def get(self, key: str, default: Any = None) -> Any:
        return self.raw.get(key, default)

    def int_(self, key: str, default: Any = None, allowed: tuple[int, ...] | None = None, group: bool = False) -> Any:
        v = self.raw.get(key, default)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(key, f"must be an integer, got {json.dumps(v)}")
        if group:
            if v == -1:
                return None  # per output channel
            if v < 1:
                raise self.fail(key, f"must be a positive group size (or -1 for one scale per output channel), got {v}")
            if v > 1 << 20:
                raise self.fail(key, f"is absurd: {v} is above the limit of {1 << 20:,}")
        if allowed is not None and v not in allowed:
            raise self.fail(key, f"is {v}; supported: {', '.join(map(str, allowed))}")
        return v

    def bool_(self, key: str, default: bool) -> bool:
        v = self.raw.get(key, default)
        if not isinstance(v, bool):
            raise self.fail(key, f"must be true or false, got {json.dumps(v)}")
        return v

    def str_(self, key: str, default: Any = None, allowed: tuple[str, ...] | None = None) -> Any:
        v = self.raw.get(key, default)
        if v is None:
            return None
        if not isinstance(v, str):
            raise self.fail(key, f"must be a string, got {json.dumps(v)}")
        if allowed is not None and v.lower() not in allowed:
            raise self.fail(key, f"is {json.dumps(v)}; supported: {', '.join(allowed)}")
        return v.lower() if allowed is not None else v

    def patterns(self, *keys: str) -> tuple[str, ...]:
        out: list[str] = []
        for key in keys:
            v = self.raw.get(key)
            if v is None:
                continue
            if not isinstance(v, list) or not all(isinstance(p, str) and p for p in v):
                raise self.fail(key, f"must be a list of module names, got {json.dumps(v)[:200]}")
            for p in v:
                if p.startswith("re:"):
                    try:
                        re.compile(p[3:])
                    except re.error as e:
                        raise self.fail(key, f"holds {json.dumps(p)}, not a regular expression: {e}") from None
            out.extend(v)
        return tuple(out)


def parse_quantization(raw: Any, where: str) -> WeightQuant | None:
    """The ``quantization_config`` object of a config.json (None: no such field)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise RooflineError(f"{where}: field 'quantization_config' must be an object, got {json.dumps(raw)[:200]}")
    q = _Q(raw, where)
    method = raw.get("quant_method")
    if method is None and (raw.get("load_in_4bit") or raw.get("load_in_8bit")):
        method = "bitsandbytes"
    if not isinstance(method, str):
        raise q.fail("quant_method", f"must be a string, got {json.dumps(method)}")
    method = method.lower()
    if method not in QUANT_METHODS:
        err = unknown_name_error("quantization method", method, QUANT_METHODS)
        raise RooflineError(f"{where}: field 'quantization_config.quant_method': {err}")
    wq = _PARSERS[method](q)
    kv = _kv_cache_dtype(q)
    if kv is not None:
        from dataclasses import replace

        wq = replace(wq, kv_cache_dtype=kv)
    return wq


def _kv_cache_dtype(q: _Q) -> str | None:
    algo = q.get("kv_cache_quant_algo")
    if algo is None and isinstance(q.get("quantization"), dict):
        algo = q.get("quantization").get("kv_cache_quant_algo")
    if algo is not None:
        if not isinstance(algo, str) or algo.lower() not in ("fp8", "nvfp4"):
            raise q.fail("kv_cache_quant_algo", f"is {json.dumps(algo)[:80]}; supported: FP8, NVFP4")
        return "fp8" if algo.lower() == "fp8" else "fp4"
    scheme = q.get("kv_cache_scheme")
    if scheme is None:
        return None
    if not isinstance(scheme, dict):
        raise q.fail("kv_cache_scheme", "must be an object or null")
    k = _Q(scheme, q.where, q.prefix + "kv_cache_scheme.")
    bits = k.int_("num_bits", 8, allowed=(4, 8))
    kind = k.str_("type", "float", allowed=("int", "float"))
    return ("fp" if kind == "float" else "int") + str(bits)


def _group_label(group_in: int | None, group_out: int | None) -> str:
    if group_out is None and group_in is None:
        return "per tensor"
    if group_in is None:
        return "per output channel"
    if group_out and group_out > 1:
        return f"{group_in}x{group_out} blocks"
    return f"group {group_in}"


def _gptq(q: _Q) -> WeightQuant:
    bits = q.int_("bits", None, allowed=(4, 8))
    if bits is None:
        raise q.fail("bits", "is missing")
    g = q.int_("group_size", 128, group=True)
    excluded = q.patterns("modules_to_not_convert")
    lm = q.bool_("lm_head", False)
    return WeightQuant(
        "gptq", f"int{bits}", bits, g, 1, 2.0, zero_bits=bits, excluded=excluded, lm_head=lm,
        compute_note="weight-only: dequantized to fp16/bf16 for the GEMMs",
        label=f"gptq int{bits}, {_group_label(g, 1)}, fp16 scales, {bits}-bit zero points",
    )


def _awq(q: _Q) -> WeightQuant:
    bits = q.int_("bits", q.get("w_bit", 4), allowed=(4,))
    key = "group_size" if "group_size" in q.raw else "q_group_size"
    g = q.int_(key, 128, group=True)
    zp = q.bool_("zero_point", True)
    return WeightQuant(
        "awq", "int4", bits, g, 1, 2.0, zero_bits=bits if zp else 0, excluded=q.patterns("modules_to_not_convert"),
        compute_note="weight-only: dequantized to fp16 for the GEMMs",
        label=f"awq int4, {_group_label(g, 1)}, fp16 scales" + (", 4-bit zero points" if zp else ""),
    )


def _fp8_compute(activations: bool) -> tuple[str, str]:
    if activations:
        return "fp8", "W8A8: activations quantized to fp8 too (pass --dtype fp8 to time the GEMMs at the fp8 peak)"
    return "bf16", "weight-only fp8: dequantized for the GEMMs"


def _fbgemm_fp8(q: _Q) -> WeightQuant:
    dtype, note = _fp8_compute(True)
    return WeightQuant(
        "fbgemm_fp8", "fp8", 8, None, 1, 4.0, compute_dtype=dtype, compute_note=note,
        excluded=("lm_head",) + q.patterns("modules_to_not_convert"),
        label="fbgemm fp8, per output channel, fp32 scales",
    )


def _fp8(q: _Q) -> WeightQuant:
    block = q.get("weight_block_size")
    if block is None:
        g_in = g_out = None
    else:
        if (not isinstance(block, list) or len(block) != 2
                or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in block)):
            raise q.fail("weight_block_size", f"must be two positive integers [rows, columns], got {json.dumps(block)}")
        g_out, g_in = block
    scheme = q.str_("activation_scheme", "dynamic", allowed=("dynamic", "static"))
    dtype, note = _fp8_compute(True)
    return WeightQuant(
        "fp8", "fp8", 8, g_in, g_out, 4.0, compute_dtype=dtype, compute_note=note + f"; {scheme} activation scales",
        excluded=("lm_head",) + q.patterns("modules_to_not_convert"),
        label=f"fp8 e4m3, {_group_label(g_in, g_out)}, fp32 scales",
    )


def _bitsandbytes(q: _Q) -> WeightQuant:
    four, eight = q.bool_("load_in_4bit", False), q.bool_("load_in_8bit", False)
    if four == eight:
        raise q.fail("load_in_4bit", "or 'load_in_8bit' must be true (exactly one of them)")
    excluded = ("lm_head",) + q.patterns("llm_int8_skip_modules")
    if eight:
        return WeightQuant(
            "bitsandbytes", "int8", 8, None, 1, 4.0, compute_dtype="int8", excluded=excluded,
            compute_note="LLM.int8(): int8 GEMMs, outlier columns in fp16 (not modelled)",
            label="bitsandbytes int8, per output row, fp32 scales",
        )
    kind = q.str_("bnb_4bit_quant_type", "fp4", allowed=("nf4", "fp4"))
    compute = q.str_("bnb_4bit_compute_dtype", "float32")
    compute_dtype = {"float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "fp32": "fp32", "fp16": "fp16", "bf16": "bf16"}.get(compute)
    if compute_dtype is None:
        raise q.fail("bnb_4bit_compute_dtype", f"is {json.dumps(compute)}; supported: float32, float16, bfloat16")
    double = q.bool_("bnb_4bit_use_double_quant", False)
    # absmax per 64 weights: fp32, or (double quant) 8-bit with one fp32 scale per 256 absmax
    scale = 1.0 + 4.0 / 256 if double else 4.0
    return WeightQuant(
        "bitsandbytes", kind, 4, 64, 1, scale, compute_dtype=compute_dtype, excluded=excluded,
        compute_note=f"weight-only: dequantized to {compute_dtype} for the GEMMs",
        label=f"bitsandbytes {kind}, blocks of 64, " + ("8-bit absmax (double quant)" if double else "fp32 absmax"),
    )


def _mxfp4(q: _Q) -> WeightQuant:
    return WeightQuant(
        "mxfp4", "fp4", 4, 32, 1, 1.0, excluded=q.patterns("modules_to_not_convert"),
        compute_note="weight-only on GPUs without fp4 units (dequantized to bf16); fp4 GEMMs where the GPU has them",
        label="mxfp4 (e2m1), group 32, e8m0 scales",
    )


def _ct_scheme(q: _Q, group: str, scheme: dict) -> tuple[WeightQuant, bool]:
    s = _Q(scheme, q.where, f"quantization_config.config_groups.{group}.weights.")
    w = scheme
    bits = s.int_("num_bits", None, allowed=(4, 8))
    if bits is None:
        raise s.fail("num_bits", "is missing")
    kind = s.str_("type", "int", allowed=("int", "float"))
    strategy = s.str_("strategy", "tensor", allowed=("tensor", "channel", "group", "tensor_group", "block"))
    symmetric = s.bool_("symmetric", True)
    if strategy in ("group", "tensor_group"):
        g = s.int_("group_size", None)
        if g is None or g < 1:
            raise s.fail("group_size", f"must be a positive integer for strategy '{strategy}', got {json.dumps(w.get('group_size'))}")
        g_in, g_out = g, 1
    elif strategy == "block":
        block = w.get("block_structure")
        if not isinstance(block, list) or len(block) != 2 or any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in block):
            raise s.fail("block_structure", f"must be two positive integers [rows, columns], got {json.dumps(block)}")
        g_out, g_in = block
    elif strategy == "channel":
        g_in, g_out = None, 1
    else:
        g_in = g_out = None
    dtype = ("fp" if kind == "float" else "int") + str(bits)
    # NVFP4: fp8 scales per 16; the others: bf16 scales (the checkpoint's dtype)
    scale = 1.0 if (kind == "float" and bits == 4) else 2.0
    wq = WeightQuant(
        "compressed-tensors", dtype, bits, g_in, g_out, scale, zero_bits=0 if symmetric else bits,
        label=f"compressed-tensors {dtype}, {_group_label(g_in, g_out)}, {'fp8' if scale == 1.0 else 'bf16'} scales"
        + ("" if symmetric else f", {bits}-bit zero points"),
    )
    return wq, kind == "float"


def _compressed_tensors(q: _Q) -> WeightQuant:
    sparsity = q.get("sparsity_config")
    if sparsity:  # 2:4 structured sparsity halves the stored weights and the GEMM work: not modelled
        fmt = sparsity.get("format") if isinstance(sparsity, dict) else sparsity
        raise q.fail("sparsity_config", f"is set ({json.dumps(fmt)[:80]}): sparse weights are not modelled")
    groups = q.get("config_groups")
    if not isinstance(groups, dict) or not groups:
        raise q.fail("config_groups", "must be an object of one or more quantization schemes")
    found: list[tuple[WeightQuant, bool, bool]] = []
    for name, g in groups.items():
        if not isinstance(g, dict):
            raise q.fail(f"config_groups.{name}", "must be an object")
        targets = g.get("targets")
        if targets != ["Linear"]:
            raise q.fail(f"config_groups.{name}.targets", f"is {json.dumps(targets)[:200]}; only [\"Linear\"] (every linear layer) is modelled")
        w = g.get("weights")
        if not isinstance(w, dict):
            raise q.fail(f"config_groups.{name}.weights", "must be an object (weight-quantized schemes only)")
        wq, is_float = _ct_scheme(q, name, w)
        acts = g.get("input_activations")
        if acts is not None and not isinstance(acts, dict):
            raise q.fail(f"config_groups.{name}.input_activations", "must be an object or null")
        found.append((wq, is_float, acts is not None))
    if len(found) > 1:
        raise q.fail("config_groups", f"holds {len(found)} schemes; one scheme for every Linear is modelled")
    wq, is_float, acts = found[0]
    if acts:
        compute = wq.weight_dtype if is_float else "int8" if wq.bits == 8 else wq.weight_dtype
        note = f"W{wq.bits}A{wq.bits}: activations quantized too (pass --dtype {compute} to time the GEMMs at that peak)"
    else:
        compute, note = "bf16", "weight-only: dequantized to bf16 for the GEMMs"
    from dataclasses import replace

    return replace(wq, compute_dtype=compute, compute_note=note, excluded=q.patterns("ignore"), lm_head=True)


def _modelopt(q: _Q) -> WeightQuant:
    raw = q.raw.get("quantization", q.raw)  # hf_quant_config.json nests it under "quantization"
    m = _Q(raw, q.where, q.prefix + ("quantization." if raw is not q.raw else ""))
    algo = m.str_("quant_algo", None, allowed=("nvfp4", "fp8"))
    if algo is None:
        raise m.fail("quant_algo", "is missing")
    excluded = m.patterns("exclude_modules", "ignore")
    if algo == "fp8":
        return WeightQuant("modelopt", "fp8", 8, None, None, 4.0, compute_dtype="fp8", excluded=excluded, lm_head=True,
                           compute_note="W8A8: fp8 activations (pass --dtype fp8)", label="modelopt fp8, per tensor, fp32 scales")
    g = m.int_("group_size", 16, allowed=(16,))
    return WeightQuant(
        "modelopt", "fp4", 4, g, 1, 1.0, compute_dtype="fp4", excluded=excluded, lm_head=True,
        compute_note="W4A4 NVFP4: fp4 activations (pass --dtype fp4 on GPUs with fp4 units)",
        label="modelopt nvfp4 (e2m1), group 16, fp8 scales",
    )


_PARSERS = {
    "gptq": _gptq,
    "awq": _awq,
    "compressed-tensors": _compressed_tensors,
    "fbgemm_fp8": _fbgemm_fp8,
    "fp8": _fp8,
    "bitsandbytes": _bitsandbytes,
    "mxfp4": _mxfp4,
    "modelopt": _modelopt,
}


def plain_weights(weight_dtype: str, group_size: int = 128) -> WeightQuant | None:
    """The format ``--weight-dtype`` names, as the analysis stores it: every decoder matrix at that
    dtype (int4 with one 2-byte scale per ``group_size`` weights); None for 16-bit."""
    from rooflinecli.dtypes import BYTES_PER_ELEMENT, WEIGHT_DTYPES, check_dtype

    check_dtype(weight_dtype, WEIGHT_DTYPES, "weight dtype (--weight-dtype)")
    if weight_dtype in ("bf16", "fp16"):
        return None
    bits = int(BYTES_PER_ELEMENT[weight_dtype] * 8)
    if weight_dtype == "int4":
        return WeightQuant("--weight-dtype", "int4", 4, group_size, 1, 2.0, label=f"int4, group {group_size}, 2-byte scales (--weight-dtype)")
    return WeightQuant("--weight-dtype", weight_dtype, bits, None, None, 0.0, label=f"{weight_dtype} (--weight-dtype)")


def weight_dtype_note(cfg, weight_dtype: str) -> str | None:
    """The note printed when ``--weight-dtype`` replaces a checkpoint's own quantization_config."""
    if cfg.quantization is None:
        return None
    return f"note: --weight-dtype {weight_dtype} replaces {cfg.name}'s own {cfg.quantization.label} (its quantization_config)"


def weights_label(cfg, wl) -> str:
    """What a prediction reads the weights as: the checkpoint's own format ("gptq int4"), or the
    workload's ``weight_dtype`` when the model has none or --weight-dtype replaced it."""
    q = cfg.quantization
    if q is None or wl.weight_dtype_overrides:
        return wl.weight_dtype
    return q.method if q.weight_dtype in q.method else f"{q.method} {q.weight_dtype}"  # "mxfp4", "fp8", "gptq int4"


#: compute dtypes a format's GEMMs run in that differ in peak from 16-bit (W8A8, W4A4): applied
#: when --dtype is not given; a weight-only format's bf16/fp16/fp32 dequantization is not
IMPLIED_COMPUTE_DTYPES: tuple[str, ...] = ("fp8", "int8", "fp4")


def checkpoint_dtypes(cfg, wl, dtype_given: bool, kv_given: bool, specs=()):
    """(workload, notes): the compute dtype a checkpoint's format implies (W8A8 fp8 / int8, NVFP4
    W4A4) and the KV-cache dtype it declares (modelopt ``kv_cache_quant_algo``, compressed-tensors
    ``kv_cache_scheme``) applied where --dtype / --kv-dtype (or --kv-bits) were not given, with a
    note saying so; a given option replaces them, with a note saying that. A compute dtype one of
    ``specs`` (the GPUs) has no peak for (fp4 on Hopper) is not applied, and the note says so. Nothing changes
    for a model without a ``quantization_config`` or when --weight-dtype replaced it."""
    from dataclasses import replace

    q = cfg.quantization
    notes: list[str] = []
    if q is None or wl.weight_dtype_overrides:
        return wl, notes
    own = f"{cfg.name}'s {weights_label(cfg, wl)} checkpoint"
    if q.compute_dtype in IMPLIED_COMPUTE_DTYPES and q.compute_dtype != wl.compute_dtype:
        if dtype_given:
            notes.append(f"--dtype {wl.compute_dtype} replaces the {q.compute_dtype} compute that {own} implies")
        elif any(not _has_peak(s, q.compute_dtype) for s in specs):
            lacking = next(s for s in specs if not _has_peak(s, q.compute_dtype))
            notes.append(f"{wl.compute_dtype} compute: {own} implies {q.compute_dtype}, for which {lacking.id} has no peak")
        else:
            wl = replace(wl, compute_dtype=q.compute_dtype)
            notes.append(f"{q.compute_dtype} compute: {own} implies it (--dtype replaces it)")
    kv = q.kv_cache_dtype
    if kv is not None:
        from rooflinecli.dtypes import KV_DTYPES

        # fp4 (NVFP4) is no --kv-dtype name: 4 bits an element, as --kv-bits 4
        own_kv = replace(wl, kv_dtype=kv, kv_bits=None) if kv in KV_DTYPES else replace(wl, kv_bits=float(kv.removeprefix("fp")))
        if own_kv.kv_label != wl.kv_label:
            if kv_given:
                notes.append(f"--kv-dtype / --kv-bits ({wl.kv_label}) replaces the {own_kv.kv_label} KV cache that {own} declares")
            else:
                wl = own_kv
                notes.append(f"KV {wl.kv_label}: {own} declares it (--kv-dtype replaces it)")
    return wl, notes


def _has_peak(spec, dtype: str) -> bool:
    try:
        spec.peak_flops_per_s(dtype)
    except RooflineError:
        return False
    return True
