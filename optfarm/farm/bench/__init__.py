"""Benchmarks of the farm itself: recommendation latency (``latency``, ``farm bench``) and what
Ray, the actors and the store add to a sweep (``overhead``, ``farm bench-farm``)."""
