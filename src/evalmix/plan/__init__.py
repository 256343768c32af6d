"""evalmix.plan."""
