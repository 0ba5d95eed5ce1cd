"""muster.api.compat."""
