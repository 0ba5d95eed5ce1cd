"""muster.store."""
