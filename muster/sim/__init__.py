"""muster.sim."""
