"""One folder per algorithm: ``spec.py`` (torch-free metadata), the rank code, a README."""
