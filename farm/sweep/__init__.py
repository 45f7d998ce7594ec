"""Sweeps: the spec and its expansion (``spec``), a leaderboard's spec (``board_spec``), running
them (``runner``: on ``farm.runtime``, into ``farm.store``, tracked by ``farm.tracking``) and the
store's read API (``results``)."""
