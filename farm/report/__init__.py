"""Reports in the papers' form (``analysis``, ``plots``), the papers' published numbers in one
place (``papers``) and the nightly regression gate (``regress``)."""
