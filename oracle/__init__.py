"""optfarm's data layer: datasets as Arrow tables, search spaces, problems, and the oracle."""

from .dataset import Dataset, DatasetError, DatasetMeta
from .oracle import Observation, Oracle
from .problem import Constraint, Objective, Problem
from .space import Dimension, SearchSpace

__all__ = ["Constraint", "Dataset", "DatasetError", "DatasetMeta", "Dimension", "Objective",
           "Observation", "Oracle", "Problem", "SearchSpace"]
