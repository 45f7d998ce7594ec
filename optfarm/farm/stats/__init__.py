"""Statistics over per-seed and per-table scores, pure functions shared by the board and the
gate: paired differences and Holm-Tarone (``paired``), ranks across tables with Friedman,
Nemenyi and Wilcoxon-Holm (``ranks``), and the blocks a pair needs (``power``)."""
