"""Hierarchical sharded gradient synchronisation with capacity-proportional slices."""
