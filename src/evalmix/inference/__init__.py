"""evalmix.inference."""
