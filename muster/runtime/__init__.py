"""muster.runtime."""
