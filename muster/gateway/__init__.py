"""The serving gateway (placeholder docstring, replaced below)."""
