"""Secure two-party training on secret shares: forward in Z_2^32, backward in Z_2^64."""
