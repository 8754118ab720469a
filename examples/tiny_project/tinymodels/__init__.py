"""A tiny package whose models torch-upgrade-check runs: see models.py for the two factory shapes."""
