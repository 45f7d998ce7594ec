"""Reports in the papers' form: their numbers (``analysis``), the HTML page and figures
(``page``, ``plots``), the page's sections (``sections``: a registry; ``pooled``), the papers'
published numbers in one place (``papers``)."""
