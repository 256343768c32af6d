"""evalmix.compare."""
