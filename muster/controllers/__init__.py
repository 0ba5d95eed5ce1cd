"""muster.controllers."""
