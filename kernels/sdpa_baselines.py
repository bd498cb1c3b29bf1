"""Fair torch baselines for the attention kernels: every SDPA backend the installed torch offers.

``KernelOp.baselines`` maps a backend name to a factory ``factory(**inputs)`` that does the untimed
set-up and returns a zero-argument callable, or None when that backend cannot run these inputs; the
runner checks and times each and keeps the fastest. ``sdpa_factories`` builds one factory per SDPA
backend ("sdpa:cudnn", "sdpa:flash", "sdpa:efficient", "sdpa:math", and "sdpa:default", torch's
own dispatch).

GQA: through ``enable_gqa=True`` where the backend takes it; where it raises, through K/V expanded
to all query heads inside the factory (not timed). A torch without ``enable_gqa``, without
``torch.nn.attention`` or without a backend (cuDNN appeared in torch 2.5) just offers fewer
factories. Each factory probes its call once: a backend that raises for the inputs gives None.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

#: SDPA backends tried, by the name recorded in a result row (None: torch's default dispatch)
SDPA_BACKENDS = {
    "sdpa:default": None,
    "sdpa:cudnn": "CUDNN_ATTENTION",
    "sdpa:flash": "FLASH_ATTENTION",
    "sdpa:efficient": "EFFICIENT_ATTENTION",
    "sdpa:math": "MATH",
}
#: the fused backends, tried for the flash and decode kernels (the math backend materializes the
#: scores: tens of GB at the long-context cases; it is naive attention's own baseline)
FUSED_BACKENDS = ("sdpa:default", "sdpa:cudnn", "sdpa:flash", "sdpa:efficient")


def _backend(name: str | None):
    """(found, SDPBackend member or None for the default dispatch)."""
    if name is None:
        return True, None
    try:
        from torch.nn.attention import SDPBackend
    except ImportError:
        return False, None
    member = getattr(SDPBackend, name, None)
    return member is not None, member


#: largest K + V copy a factory makes to expand GQA heads for a backend without enable_gqa
MAX_EXPAND_BYTES = 8 << 30


def sdpa_call(q, k, v, backend_name: str | None, post=None, max_expand_bytes: int = MAX_EXPAND_BYTES, **kw) -> Callable[[], Any] | None:
    """A probed zero-argument SDPA call on q [B, H, Sq, D], k [B, H_kv, S, D], v [B, H_kv, S, Dv]
    pinned to one backend (None: default dispatch), GQA by ``enable_gqa`` or else by K/V expanded
    here; None if the backend cannot run them (or this torch lacks it). ``post`` maps SDPA's output
    to the op's (a view, say), inside the call. K/V are expanded only up to ``max_expand_bytes``."""
    import torch.nn.functional as F

    found, member = _backend(backend_name)
    if not found:
        return None
    group = q.shape[1] // k.shape[1]

    def pinned(fn):
        if member is None:
            return fn if post is None else (lambda: post(fn()))
        from torch.nn.attention import sdpa_kernel

        def call():
            with sdpa_kernel(member):
                o = fn()
            return o if post is None else post(o)

        return call

    tries = [lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True, **kw)] if group > 1 else []
    if group > 1:
        if (k.numel() * k.element_size() + v.numel() * v.element_size()) * group <= max_expand_bytes:
            ke, ve = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
            tries.append(lambda: F.scaled_dot_product_attention(q, ke, ve, **kw))
    else:
        tries.append(lambda: F.scaled_dot_product_attention(q, k, v, **kw))
    for fn in tries:
        call = pinned(fn)
        try:
            with warnings.catch_warnings():  # a declining backend says why as a warning, then raises
                warnings.simplefilter("ignore")
                call()
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            continue  # this backend (or enable_gqa on this torch) cannot take these inputs
        return call
    return None


def sdpa_factories(
    prepare: Callable[..., tuple[Any, ...] | None],
    post=None,
    backends: tuple[str, ...] = FUSED_BACKENDS,
    max_expand_bytes: int = MAX_EXPAND_BYTES,
) -> dict[str, Callable[..., Callable[[], Any] | None]]:
    """One factory per SDPA backend named in ``backends``. ``prepare(**inputs)`` maps an op's
    inputs to (q, k, v, sdpa keyword arguments) in SDPA's layout (untimed), or None if SDPA cannot
    express them; ``post`` maps SDPA's output to the op's (timed, inside the call)."""

    def factory_for(backend_name):
        def factory(**inputs):
            prepared = prepare(**inputs)
            if prepared is None:
                return None
            q, k, v, kw = prepared
            return sdpa_call(q, k, v, backend_name, post=post, max_expand_bytes=max_expand_bytes, **kw)

        return factory

    return {name: factory_for(SDPA_BACKENDS[name]) for name in backends}


def plain(fn: Callable[..., Any]) -> Callable[..., Callable[[], Any]]:
    """A baseline factory for a plain torch function of the op's inputs (no set-up)."""

    def factory(**inputs):
        return lambda: fn(**inputs)

    return factory


def check_candidates(baselines, inputs, ref, tol) -> list[str]:
    """Run every candidate factory on ``inputs``; each one that does not decline must match ``ref``
    within ``tol`` (relative L2). Returns the names that ran. For the kernel tests."""
    from kernels.testing import compare

    ran = []
    for name, factory in baselines.items():
        call = factory(**inputs)
        if call is None:
            continue
        c = compare(call(), ref, tol)
        assert c.ok, f"{name}: {c.message}"
        ran.append(name)
    return ran
