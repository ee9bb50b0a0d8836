"""Golden loss curves: seeded runs of five algorithms, kept to catch unintended changes."""
