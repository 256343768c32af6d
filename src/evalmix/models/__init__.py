"""evalmix.models."""
