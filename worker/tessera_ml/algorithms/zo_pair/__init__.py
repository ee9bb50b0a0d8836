"""Distributed forward-only (zeroth-order) training where only loss scalars cross the network."""
