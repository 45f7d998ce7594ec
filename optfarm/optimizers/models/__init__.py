"""Surrogate models. One protocol: ``fit(X, y)``, ``predict(X) -> (mean, std)``, and a cheap
``with_points(X, y)`` returning a model refitted with fantasised points (the original is left
unchanged)."""
