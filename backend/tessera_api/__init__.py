"""Tessera's control plane: the system of record, served by FastAPI. Never imports torch."""

__version__ = "0.1.0"
