"""muster.scheduler."""
