"""The worker: a Celery consumer per party that launches ranks and reports to the control plane."""
