"""Muster: a GPU-aware orchestrator for ML training jobs and pipelines."""

__version__ = "0.1.0"
