"""Grammar-constrained decoding engine."""
