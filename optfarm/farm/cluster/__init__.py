"""Ray clusters on this machine (``farm cluster``)."""
