"""Role-based split learning (``split_nn``)."""
