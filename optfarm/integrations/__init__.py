"""The farm's optimizers inside the tools users already run (``pip install 'optfarm[peers]'``
for Optuna; Ray Tune comes with optfarm's Ray):

- ``optfarm.integrations.optuna_sampler.OptfarmSampler("lynceus", space, problem)``: an Optuna
sampler;
- ``optfarm.integrations.ray_tune.OptfarmSearch("lynceus", space, problem)``: a Ray Tune searcher.

Both drive a farm optimizer through its ask/tell API over a finite space of configurations
(``optfarm.oracle.SearchSpace``), one job at a time, and hand the job its dataset size and time cap.
Each module imports its tool; this package imports neither.
"""
