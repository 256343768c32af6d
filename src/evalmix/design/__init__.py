"""evalmix.design."""
