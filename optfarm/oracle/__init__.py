"""optfarm's data layer: datasets as Arrow tables, search spaces, problems, the oracle, and the
optimizer contract (``contract``: what optimizers suggest, observe and recommend)."""

from .contract import Observation, Recommendation, Suggestion
from .dataset import Dataset, DatasetError, DatasetMeta
from .oracle import Oracle
from .problem import Constraint, Objective, Problem, ProblemError
from .space import Dimension, SearchSpace

__all__ = [
    "Constraint",
    "Dataset",
    "DatasetError",
    "DatasetMeta",
    "Dimension",
    "Objective",
    "Observation",
    "Oracle",
    "Problem",
    "ProblemError",
    "Recommendation",
    "SearchSpace",
    "Suggestion",
]
