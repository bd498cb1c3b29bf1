"""Measurement: the timing harness, ``roofline bench``, ``calibrate``, ``validate``, the efficiency
fit and the end-to-end decoder-layer check.

Nothing here imports torch or triton at module level: the analytical commands stay fast, and the
parts that need no GPU (validation, fitting, the spec writer) run anywhere.
"""
