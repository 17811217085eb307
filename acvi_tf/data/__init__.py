"""Datasets: the source registry (official files + local mirror) and one module per task."""
