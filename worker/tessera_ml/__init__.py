"""Tessera's algorithm library: torch-only, no Celery, FastAPI or SQLAlchemy.

``tessera_ml.spec``, ``tessera_ml.registry``, ``tessera_ml.data.refs`` and
``tessera_ml.models.spec`` import without torch so the control plane can read algorithm
metadata and validate jobs; everything that runs ranks imports torch.
"""
