"""The results store of a sweep: its records and traces on a path or a `pyarrow.fs`
URI (``location``), one driver at a time (``locks``), the store (``store``), its trace segments
(``trace_segments``); its read API, which expands the stored sweep spec, is
``optfarm.farm.sweep.results``."""
