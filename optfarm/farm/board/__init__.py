"""The leaderboard: which optimizer for a job. The board at budgets stated in each table's own
terms (``leaderboard``), its page and verdict (``page``), its figures (``plots``) and its price
before it runs (``plan``)."""
