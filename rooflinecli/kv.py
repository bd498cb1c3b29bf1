"""KV-cache bytes of a whole model, built on the cost formulas in ``rooflinecli.formulas``.

Per layer and token a standard attention layer caches K and V: 2*H_kv*D elements
(``formulas.kv_cache_bytes``); an MLA layer caches one latent plus the shared RoPE key:
kv_lora_rank + rope_dim elements (``formulas.mla_kv_cache_bytes``). A sliding-window layer holds
at most W tokens (``formulas.effective_context``), and so does a chunked layer (Llama-4) of chunk
W: it needs only the current chunk's (N mod W) + 1 tokens, but an engine allocates for a whole
chunk, so capacity and fit count min(N, W); compressed attention (``cfg.compressed``) caches
ceil(N/ratio) entries plus a local window (``formulas.compressed_entries``); a paged cache rounds
each sequence up to whole blocks (``formulas.paged_tokens``). Only attention layers cache K and V:
a hybrid's Mamba layers keep a fixed state per sequence instead (``mamba_state_bytes``).
"""

from __future__ import annotations

from rooflinecli import formulas
from rooflinecli.models import ModelConfig


def _layers_bytes(cfg: ModelConfig, num_layers, tokens, b, B):
    """Cache bytes of ``num_layers`` layers holding ``tokens`` entries each, for B sequences."""
    if cfg.mla is not None:
        return formulas.mla_kv_cache_bytes(num_layers, cfg.mla.kv_lora_rank, cfg.mla.qk_rope_head_dim, tokens, b, B)
    return formulas.kv_cache_bytes(num_layers, cfg.num_kv_heads, cfg.head_dim, tokens, b, B)


def kv_bytes_per_token(cfg: ModelConfig, bytes_per_element: float) -> float:
    """Cache bytes one token adds to one sequence, whole model, every layer counted.

    This is the uncapped, uncompressed figure (a sliding-window layer stops growing after W tokens
    and a compressed layer grows by 1/ratio per token: use ``kv_cache_bytes_for`` for totals).
    """
    return float(_layers_bytes(cfg, cfg.num_attention_layers, 1, bytes_per_element, 1))


def mamba_state_bytes(cfg: ModelConfig, bytes_per_element: float) -> float:
    """State bytes one sequence holds across a hybrid's Mamba layers (SSM state and conv window,
    ``params.mamba_state_elements`` each), at any context; 0 without Mamba layers."""
    from rooflinecli.params import mamba_state_elements

    return float((cfg.num_layers - cfg.num_attention_layers) * mamba_state_elements(cfg) * bytes_per_element)


def kv_cache_bytes_for(cfg: ModelConfig, N, B, bytes_per_element: float, block_size: int | None = None):
    """KV-cache bytes of B sequences at context N (numpy arrays broadcast; scalars give a float).

    Full layers hold N tokens (or the compressed entries of N when ``cfg.compressed``), window
    and chunked layers min(N, W) (what an engine allocates; a chunked layer needs (N mod W) + 1);
    with ``block_size`` each layer's entries round up to whole pages.
    A hybrid's Mamba layers add their fixed state per sequence (``mamba_state_bytes``).
    """
    n_window = sum(1 for i in range(cfg.num_layers) if cfg.uses_window(i))
    n_full = cfg.num_attention_layers - n_window
    if formulas._scalars(N, B):  # one figure (model show): plain floats, no numpy import
        N_arr = float(N)
        scalar = True
    else:
        import numpy as np

        N_arr = np.asarray(N, dtype=float)
        scalar = False
    if cfg.compressed is not None:
        full_tokens = formulas.compressed_entries(N_arr, cfg.compressed.ratio, cfg.compressed.window)
    else:
        full_tokens = N_arr
    total = _layers_bytes(cfg, n_full, formulas.paged_tokens(full_tokens, block_size), bytes_per_element, B)
    if n_window:
        window_tokens = formulas.effective_context(N_arr, cfg.sliding_window)
        total = total + _layers_bytes(cfg, n_window, formulas.paged_tokens(window_tokens, block_size), bytes_per_element, B)
    if cfg.mamba is not None:
        total = total + mamba_state_bytes(cfg, bytes_per_element) * B
    if scalar:
        return float(total)
    total = np.asarray(total, dtype=float)
    return float(total) if total.ndim == 0 else total
