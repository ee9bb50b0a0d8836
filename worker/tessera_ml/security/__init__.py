"""Certificates and TLS between the parties of a deployment."""
