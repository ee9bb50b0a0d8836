"""Tessera's algorithm library: torch-only, no Celery, FastAPI or SQLAlchemy.

``tessera_ml.spec`` and ``tessera_ml.registry`` import without torch so the control plane can
read algorithm metadata; everything that runs ranks imports torch.
"""
