"""muster.cli."""
