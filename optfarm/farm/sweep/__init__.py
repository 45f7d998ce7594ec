"""Sweeps: the spec and its expansion (``spec``), a leaderboard's spec (``board_spec``), running
them (``runner``: on ``optfarm.farm.runtime``, into ``optfarm.farm.store``, tracked by
``optfarm.farm.tracking``) and the store's read API (``results``)."""
