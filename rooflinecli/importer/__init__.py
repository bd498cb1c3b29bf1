"""Importers of measured per-op data published by others into calibration files of ours
(``aiconfigurator``: NVIDIA's aiconfigurator-core / aisimulate tables)."""
