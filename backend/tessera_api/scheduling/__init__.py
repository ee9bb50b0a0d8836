"""Placement, the Celery dispatcher and the scheduler loop (no torch, no worker imports)."""
