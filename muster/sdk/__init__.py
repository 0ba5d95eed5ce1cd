"""muster.sdk."""
