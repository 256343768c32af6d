"""evalmix.report."""
