"""Generators: decoding loops and framework integrations built on the matcher."""
