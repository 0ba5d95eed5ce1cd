"""muster.server."""
