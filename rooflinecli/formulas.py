"""The cost formulas: one definition of each, used by the analytical model, the kernels' cost
functions, validation and reports alike.

Every function works on Python numbers and on numpy arrays (broadcasting), so the same code
answers one ``analyze`` question and a million-row ``sweep``. Units are in the names: ``*_flops``
(floating-point operations), ``*_bytes``, ``*_s`` (seconds), ``*_flops_per_s``, ``*_bytes_per_s``.
Notation (``docs/reference.md``): B batch, S prompt tokens, N context tokens, L layers,
H query heads, H_kv key/value heads, D head dim, b bytes per element, E experts, k experts per token.
"""

from __future__ import annotations

import math


class _LazyNumpy:
    """numpy, imported on first use: ``model show`` and ``hw list`` answer from Python scalars and
    never pay numpy's import (about 0.1 s); the first ``np.`` call of an array path imports it."""

    def __getattr__(self, name: str):
        import numpy

        globals()["np"] = numpy
        return getattr(numpy, name)


np = _LazyNumpy()


def _scalars(*xs) -> bool:
    """Whether every argument is a plain Python number (then the scalar path needs no numpy)."""
    return all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in xs)

# --------------------------------------------------------------------------------------------
# Roofline
# --------------------------------------------------------------------------------------------


def ridge_point(peak_flops_per_s, bandwidth_bytes_per_s):
    """Arithmetic intensity (FLOP/byte) where compute and memory time are equal: peak / BW."""
    return peak_flops_per_s / bandwidth_bytes_per_s


def arithmetic_intensity(flops, bytes_):
    """FLOP per byte moved (inf where no bytes move)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.asarray(bytes_) > 0, np.asarray(flops, dtype=float) / np.maximum(bytes_, 1e-300), np.inf)


def attainable_flops_per_s(ai, peak_flops_per_s, bandwidth_bytes_per_s):
    """Roofline: min(peak, AI x BW)."""
    return np.minimum(peak_flops_per_s, ai * bandwidth_bytes_per_s)


def compute_time_s(flops, peak_flops_per_s, efficiency=1.0):
    return flops / (peak_flops_per_s * efficiency)


def memory_time_s(bytes_, bandwidth_bytes_per_s, efficiency=1.0):
    return bytes_ / (bandwidth_bytes_per_s * efficiency)


# --------------------------------------------------------------------------------------------
# Dense algebra
# --------------------------------------------------------------------------------------------


def linear_flops(tokens, d_in, d_out):
    """FLOPs of a linear layer over T tokens: 2*T*d_in*d_out."""
    return 2.0 * tokens * d_in * d_out


def linear_weight_bytes(d_in, d_out, weight_bytes_per_element):
    """Bytes of a d_in x d_out weight at b_w bytes per element."""
    return d_in * d_out * weight_bytes_per_element


def linear_activation_bytes(tokens, d_in, d_out, act_bytes_per_element):
    """Minimum activation traffic of a linear layer: read T*d_in, write T*d_out."""
    return tokens * (d_in + d_out) * act_bytes_per_element


def gemm_flops(M, N, K):
    """FLOPs of C[M,N] = A[M,K] @ B[K,N]: 2*M*N*K (same formula as ``linear_flops``)."""
    return linear_flops(M, K, N)


def gemm_min_bytes(M, N, K, bytes_per_element, out_bytes_per_element=None):
    """Fewest HBM bytes of a GEMM: read A and B once, write C once."""
    ob = bytes_per_element if out_bytes_per_element is None else out_bytes_per_element
    return (M * K + K * N) * bytes_per_element + M * N * ob


def quantized_weight_bytes(n_params, bits, group_size=None, scale_bytes=2.0):
    """Bytes of ``n_params`` weights at ``bits`` per element plus one scale per group:
    int4 with group g and 2-byte scales is 0.5*n + 2*n/g."""
    data = n_params * bits / 8.0
    if group_size is None or group_size <= 0:
        return data
    return data + scale_bytes * n_params / group_size


def quantized_matrix_bytes(d_in, d_out, bits, group_in, group_out=1, scale_bytes=2.0, zero_bits=0):
    """Stored bytes of one quantized d_in -> d_out matrix: d_in*d_out*bits/8 of data, plus one scale
    (``scale_bytes``) and one zero point (``zero_bits``; 0 when symmetric) per block of ``group_in``
    input elements by ``group_out`` output rows: ceil(d_in/group_in)*ceil(d_out/group_out) blocks.
    Group g: (g, 1); per output channel: (d_in, 1); per tensor: (d_in, d_out)."""
    blocks = -(-d_in // group_in) * -(-d_out // group_out)
    return d_in * d_out * bits / 8.0 + blocks * (scale_bytes + zero_bits / 8.0)


def streaming_bytes(n_elements, bytes_per_element, reads=1, writes=1):
    """Bytes of an elementwise pass: each input read and each output written once."""
    return n_elements * bytes_per_element * (reads + writes)


# --------------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------------


def causal_pairs(S, window=None):
    """Query-key pairs a causal attention over S tokens scores, per (batch, head).

    Full causal: S*(S+1)/2 (about half of S^2). With a sliding window W each query sees at most W
    keys: W*S - W*(W-1)/2 for S >= W.
    """
    S = np.asarray(S, dtype=float)
    full = S * (S + 1) / 2.0
    if window is None:
        return full
    W = np.minimum(np.asarray(window, dtype=float), S)
    return W * S - W * (W - 1) / 2.0


def chunked_attended_tokens(position, chunk):
    """Tokens a query at 0-based ``position`` attends under chunked attention (Llama-4's
    ``attention_chunk_size`` C): those of its own chunk up to itself, positions C*floor(p/C) .. p,
    (p mod C) + 1 of them. The new token of a decode step at context N sits at position N: it
    attends (N mod C) + 1 tokens, 1 on a chunk's first position and C on its last."""
    if _scalars(position, chunk):
        return float(position % chunk + 1)
    return np.mod(np.asarray(position, dtype=float), chunk) + 1.0


def chunked_causal_pairs(S, chunk):
    """Query-key pairs a chunked causal attention over S tokens scores, per (batch, head): the sum
    of ``chunked_attended_tokens`` over positions 0 .. S-1, k*C*(C+1)/2 + r*(r+1)/2 with
    S = k*C + r (each whole chunk one causal triangle, the last chunk a partial one). A prefill of
    S tokens after P cached ones scores chunked_causal_pairs(P + S) - chunked_causal_pairs(P)."""
    S = np.asarray(S, dtype=float)
    C = float(chunk)
    k = np.floor(S / C)
    r = S - k * C
    return k * C * (C + 1) / 2.0 + r * (r + 1) / 2.0


def attention_prefill_flops(B, H, S, D, causal=True, window=None, Dv=None):
    """QK^T plus PV FLOPs over B sequences of S tokens: 2*B*H*S*S*D each without masking;
    a causal mask keeps S(S+1)/2 pairs, a sliding window W keeps about W*S."""
    Dv = D if Dv is None else Dv
    pairs = causal_pairs(S, window) if causal else np.asarray(S, dtype=float) ** 2
    return 2.0 * B * H * pairs * (D + Dv)


def attention_decode_flops(B, H, N, D, Dv=None):
    """One decode step at context N: QK^T and PV, 4*B*H*N*D FLOPs (2*B*H*N*(D+Dv))."""
    Dv = D if Dv is None else Dv
    return 2.0 * B * H * N * (D + Dv)


def softmax_flops(B, H, pairs):
    """About 5 FLOPs per score (max, subtract, exp, sum, scale); counted on the vector units."""
    return 5.0 * B * H * pairs


def kv_cache_bytes(L, H_kv, D, N, b, B):
    """KV cache bytes: 2*L*H_kv*D*N*b*B (MHA: H_kv = H; MQA: H_kv = 1)."""
    return 2.0 * L * H_kv * D * N * b * B


def mla_kv_cache_bytes(L, kv_lora_rank, rope_dim, N, b, B):
    """MLA caches one latent per token and layer: L*(kv_lora_rank + rope_dim)*N*b*B."""
    return 1.0 * L * (kv_lora_rank + rope_dim) * N * b * B


def effective_context(N, window=None):
    """Tokens a layer caches and reads at context N: N, capped at W for a sliding-window layer."""
    if window is None:
        return N
    return float(min(N, window)) if _scalars(N, window) else np.minimum(N, window)


def compressed_entries(N, ratio, window=0):
    """Cache entries of a compressed-attention layer (DeepSeek-V4 CSA/HCA style) at context N:
    ceil(N / ratio) compressed entries plus up to ``window`` uncompressed recent tokens."""
    if _scalars(N, ratio, window):
        return float(math.ceil(N / ratio) + min(N, window))
    N = np.asarray(N, dtype=float)
    return np.ceil(N / ratio) + np.minimum(N, window)


def compressed_entries_read(N, ratio, top_k=None, window=0):
    """Entries a compressed-attention layer reads per decode query: the top-k of the compressed
    entries (all of them when ``top_k`` is None: HCA attends densely) plus the local window."""
    N = np.asarray(N, dtype=float)
    comp = np.ceil(N / ratio)
    if top_k is not None:
        comp = np.minimum(comp, top_k)
    return comp + np.minimum(N, window)


def kv_crossover_context(weight_bytes, L, H_kv, D, b, B):
    """Context N* where the KV bytes read per decode step equal the weight bytes:
    N* = weight_bytes / (2*L*H_kv*D*b*B)."""
    return weight_bytes / (2.0 * L * H_kv * D * b * B)


def paged_tokens(N, block_size=None):
    """Tokens a paged KV cache allocates for N tokens: N rounded up to whole blocks."""
    if block_size is None or block_size <= 1:
        return N
    if _scalars(N, block_size):
        return float(math.ceil(N / block_size) * block_size)
    return np.ceil(np.asarray(N, dtype=float) / block_size) * block_size


# FlashAttention IO (Dao et al., 2022, Theorem 2): counts are elements moved per head.


def naive_attention_hbm_elements(N, D):
    """Standard attention: read Q, K, V (3*N*D), write and re-read S and P (N x N each, written once
    and read once: 4*N^2), write O (N*D): Theta(N*D + N^2)."""
    return 4.0 * N * D + 4.0 * N * N


def flash_attention_block_sizes(D, M):
    """FlashAttention (Dao et al., 2022, Algorithm 1) block sizes for head dim D and on-chip SRAM
    of M elements: B_c = ceil(M / 4D) key/value rows, B_r = min(B_c, D) query rows."""
    B_c = np.maximum(1.0, np.ceil(np.asarray(M, dtype=float) / (4.0 * np.asarray(D, dtype=float))))
    B_r = np.minimum(B_c, D)
    return B_c, B_r


def flash_attention_hbm_elements(N, D, M):
    """FlashAttention HBM accesses per head, counted exactly as Algorithm 1 of Dao et al. (2022),
    whose Theorem 2 bounds them by Theta(N^2 D^2 / M):

    - initialise O (N x D), l and m (N each) in HBM: N*D + 2N writes;
    - the outer loop reads every K_j, V_j block once: 2*N*D;
    - each of its T_c = ceil(N / B_c) passes reads all of Q, O, l, m and writes O, l, m back:
      T_c * (3*N*D + 4*N).

    With B_c = ceil(M / 4D), T_c is about 4*N*D/M, so the total is about 12*N^2*D^2/M.
    """
    N = np.asarray(N, dtype=float)
    B_c, _ = flash_attention_block_sizes(D, M)
    T_c = np.ceil(N / B_c)
    return (N * D + 2.0 * N) + 2.0 * N * D + T_c * (3.0 * N * D + 4.0 * N)


# --------------------------------------------------------------------------------------------
# Mixture of experts
# --------------------------------------------------------------------------------------------


def routing_shares(E: int, k: int, skew: float = 1.0) -> np.ndarray:
    """Per expert (hottest first), the probability that one token routes to it, for E experts,
    top-k, and ``skew`` = the hottest expert's load over the mean load (max / mean, the usual
    imbalance figure; 1 = uniform). Loads fall off exponentially from the hottest expert to the
    coldest, w_i = exp(-beta * i / (E - 1)), with beta set so that E * w_0 / sum(w) = skew; every
    expert keeps a share (at skew 2 the coldest gets 0.41x the mean load, at skew 4 0.08x). A token
    picks k distinct experts, so no expert is picked by more than every token: k * share is capped at 1."""
    E, k, skew = int(E), int(k), float(skew)
    skew = min(skew, E / max(k, 1))  # the hottest expert at most in every token's top-k (the analysis refuses more)
    if E <= 1 or skew <= 1.0:
        return np.full(max(E, 1), min(1.0, k / max(E, 1)))
    x = np.arange(E) / (E - 1.0)
    target = E / skew  # sum of w with w_0 = 1
    lo, hi = 0.0, 1.0
    while np.exp(-hi * x).sum() > target and hi < 1e4:
        hi *= 2.0
    for _ in range(80):  # sum(exp(-beta x)) falls from E to 1 as beta grows
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.exp(-mid * x).sum() > target else (lo, mid)
    w = np.exp(-0.5 * (lo + hi) * x)
    return np.minimum(1.0, k * w / w.sum())


def expected_experts_touched(E, k, T, skew=1.0):
    """Expected distinct experts (of E) that T tokens routed top-k touch in one layer.

    Uniform routing: E*(1 - (1 - k/E)^T). With ``skew`` > 1 (the hottest expert's load over the
    mean, ``routing_shares``): sum over experts of 1 - (1 - q_i)^T, q_i the chance one token picks
    expert i. A skewed step touches somewhat fewer experts at middling T (the hot ones are picked
    again) and all of them at large T, as uniform routing does.
    """
    T = np.asarray(T, dtype=float)
    if skew == 1.0:
        return np.asarray(E, dtype=float) * (1.0 - (1.0 - k / np.asarray(E, dtype=float)) ** T)
    q = routing_shares(E, k, skew)

    def exact(t):
        return (1.0 - (1.0 - q) ** np.asarray(t, dtype=float)[..., None]).sum(axis=-1)

    if T.size <= SKEW_EXACT_POINTS:
        return exact(T)
    # a big grid (a million prefill points x 256 experts): exact on a fine grid in log(1 + T), a
    # smooth S-curve there, and interpolated (relative error < 1e-6)
    x = np.log1p(np.maximum(T, 0.0))
    grid = np.linspace(float(x.min()), float(x.max()), SKEW_GRID_POINTS)
    return np.interp(x, grid, exact(np.expm1(grid)))


#: ``expected_experts_touched`` with skew: grids up to this many points are summed exactly
SKEW_EXACT_POINTS = 4096
#: larger ones through an exact grid of this many points in log(1 + T)
SKEW_GRID_POINTS = 4097


def ep_hot_gpu_load(E: int, k: int, gpus: int, skew: float = 1.0) -> float:
    """The busiest GPU's routed token-expert pairs over the mean GPU's, with E experts split
    evenly over ``gpus`` (expert parallelism) and routing ``skew`` (``routing_shares``): the GPU
    holding the hottest expert, with an average mix of the others. 1 at skew 1; ``skew`` itself
    when each GPU holds one expert. The step waits for that GPU."""
    G = max(int(gpus), 1)
    if G == 1 or skew == 1.0 or int(E) <= 1:
        return 1.0
    q = routing_shares(E, k, skew)
    share = q / q.sum()
    per_gpu = max(int(E) // G, 1)
    hot = share[0] + (per_gpu - 1) * (1.0 - share[0]) / (int(E) - 1)
    return float(min(hot * G, G))


def ep_hot_gpu_experts_touched(E: int, k: int, T, gpus: int, skew: float = 1.0):
    """Expected distinct experts that T tokens routed top-k touch on the busiest GPU of ``gpus``
    (expert parallelism, E experts split evenly; the GPU of ``ep_hot_gpu_load``: the hottest
    expert and an average mix of the others). Its weights are what that GPU reads in a step,
    and the step waits for it. One GPU: ``expected_experts_touched``; uniform routing: that over
    ``gpus`` (every GPU alike)."""
    G = max(int(gpus), 1)
    if G == 1 or skew == 1.0 or int(E) <= 1:
        return expected_experts_touched(E, k, T, skew) / G
    T = np.asarray(T, dtype=float)
    q = routing_shares(E, k, skew)
    per_gpu = max(int(E) // G, 1)
    rest = float(q[1:].mean()) if len(q) > 1 else 0.0
    return (1.0 - (1.0 - q[0]) ** T) + (per_gpu - 1) * (1.0 - (1.0 - rest) ** T)


# --------------------------------------------------------------------------------------------
# Frontier what-ifs
# --------------------------------------------------------------------------------------------


def ntk_rope_base(base, scale, rotary_dim):
    """NTK-aware RoPE: to stretch context by s with rotary dim D, base' = base * s^(D/(D-2))."""
    return base * scale ** (rotary_dim / (rotary_dim - 2.0))


def speculative_expected_tokens(acceptance, draft_tokens):
    """Expected tokens per verification step with k drafts accepted at rate a each
    (Leviathan et al., 2023): (1 - a^(k+1)) / (1 - a); k+1 when a = 1."""
    a = np.asarray(acceptance, dtype=float)
    k = np.asarray(draft_tokens, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        val = (1.0 - a ** (k + 1.0)) / (1.0 - a)
    return np.where(a >= 1.0, k + 1.0, val)


def speculative_speedup(acceptance, draft_tokens, draft_cost_ratio=0.0, verify_cost=1.0):
    """Expected wall-clock speed-up of speculative decoding over plain decoding (Leviathan et al.,
    2023, Theorem 3.8): tokens per step over the step's cost in target-step units,
    (1 - a^(k+1)) / ((1 - a) * (v + k*c)), where c is one draft step's cost over one target step
    and v the verification pass's (k + 1 tokens per sequence through the target model): 1 in the
    paper's memory-bound setting, more once those tokens make the step compute-bound."""
    k = np.asarray(draft_tokens, dtype=float)
    return speculative_expected_tokens(acceptance, draft_tokens) / (
        np.asarray(verify_cost, dtype=float) + k * np.asarray(draft_cost_ratio, dtype=float))


def ring_allreduce_time_s(n_bytes, p, link_bytes_per_s, latency_s=0.0):
    """Ring all-reduce of n bytes over p GPUs: 2*(p-1)/p * n / link_BW + 2*(p-1) * latency."""
    p = np.asarray(p, dtype=float)
    return np.where(p > 1, 2.0 * (p - 1.0) / p * n_bytes / link_bytes_per_s + 2.0 * (p - 1.0) * latency_s, 0.0)


# --------------------------------------------------------------------------------------------
# Kernel costs
# --------------------------------------------------------------------------------------------


def attention_qo_bytes(B, H, S, D, b, Dv=None):
    """Bytes an attention kernel moves for its queries and outputs: read Q [B, H, S, D] once and
    write O [B, H, S, Dv] once, b bytes per element. With ``kv_cache_bytes(1, H_kv, D, N, b, B)``
    for K and V (or ``mla_kv_cache_bytes`` for a latent cache) it gives an attention kernel's minimum
    HBM traffic (prefill: S = N; decode: S = 1)."""
    Dv = D if Dv is None else Dv
    return 1.0 * B * H * S * (D + Dv) * b


def rmsnorm_bytes(rows, d, b, b_w=None):
    """Minimum HBM bytes of RMSNorm: read x and write y ([rows, d] at b bytes each) plus the gain
    vector [d] read once at b_w bytes (b when None). FLOPs: ``norm_flops``."""
    b_w = b if b_w is None else b_w
    return streaming_bytes(rows * d, b, reads=1, writes=1) + d * b_w


# --------------------------------------------------------------------------------------------
# Additions for the analytical model (rooflinecli.analysis)
# --------------------------------------------------------------------------------------------


def norm_flops(tokens, width):
    """RMSNorm/LayerNorm over T tokens of ``width``: about 4 FLOPs per element (square, sum,
    scale by the reciprocal root, multiply by the weight); vector-unit work."""
    return 4.0 * tokens * width


def activation_flops(tokens, width, gated=True):
    """MLP activation over T tokens of ``width``: SiLU/GELU about 4 FLOPs per element, plus the
    gate multiply (1 more) for gated MLPs."""
    return (5.0 if gated else 4.0) * tokens * width


def compressed_prefill_pairs(S, ratio, top_k=None, window=0):
    """Query-entry pairs a causal compressed-attention layer scores over S prompt tokens, per
    (sequence, head): each query i attends min(top_k, i/ratio) compressed entries (continuous
    approximation) plus min(i, window) uncompressed recent tokens."""
    S = np.asarray(S, dtype=float)
    if top_k is None:
        comp = S * S / (2.0 * ratio)
    else:
        S1 = np.minimum(S, ratio * top_k)  # queries before the top-k cap binds
        comp = S1 * S1 / (2.0 * ratio) + top_k * (S - S1)
    local = causal_pairs(S, window) if window else 0.0
    return comp + local


def all_to_all_time_s(n_bytes, p, link_bytes_per_s, latency_s=0.0):
    """All-to-all where each of p GPUs holds n bytes to scatter evenly: (p-1)/p * n / link_BW
    (+ (p-1) * latency); 0 for p = 1. Used for MoE expert-parallel dispatch and combine."""
    p = np.asarray(p, dtype=float)
    return np.where(p > 1, (p - 1.0) / p * n_bytes / link_bytes_per_s + (p - 1.0) * latency_s, 0.0)


# --------------------------------------------------------------------------------------------
# State-space (Mamba) mixers
# --------------------------------------------------------------------------------------------


def causal_conv1d_flops(tokens, channels, width):
    """Depthwise causal conv over T tokens of C channels, kernel width K: 2*T*C*K (a multiply and
    an add per tap)."""
    return 2.0 * tokens * channels * width


def causal_conv1d_bytes(tokens, seqs, channels, width, b, b_state, state_reads=1):
    """Fewest HBM bytes of a depthwise causal conv: the input read and the output written
    (T*C each at ``b``), the C*K weights read (16-bit), and each sequence's conv window of C*K
    elements (at ``b_state``) written once and read ``state_reads`` times (a prefill starts from
    zeros: 0; a decode step: 1)."""
    return (streaming_bytes(tokens * channels, b) + 2.0 * channels * width
            + (1.0 + state_reads) * seqs * channels * width * b_state)


def selective_scan_flops(tokens, channels, d_state):
    """Selective scan (Mamba's SSM) over T tokens of C channels with state size N: about 8 FLOPs
    per (token, channel, state element) (exp(dt*A), dt*B*x, dA*h + dBx, the C.h product) plus
    about 5 per (token, channel) (softplus of dt, the D*x skip, the silu(z) gate)."""
    return tokens * channels * (8.0 * d_state + 5.0)


def selective_scan_bytes(tokens, seqs, channels, d_state, b, b_state, state_reads=1):
    """Fewest HBM bytes of a selective scan: per token x, dt and z read (C each), B and C read
    (N each) and y written (C), at ``b``; A (C x N) and D (C) read once (16-bit); each sequence's
    state of C x N elements (at ``b_state``) written once and read ``state_reads`` times (a prefill
    starts from zeros: 0; a decode step: 1)."""
    return (tokens * (4.0 * channels + 2.0 * d_state) * b + 2.0 * channels * (d_state + 1)
            + (1.0 + state_reads) * seqs * channels * d_state * b_state)
