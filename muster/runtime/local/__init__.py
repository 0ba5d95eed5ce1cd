"""muster.runtime.local."""
