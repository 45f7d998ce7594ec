"""optfarm's algorithms: ask/tell optimizers, their models and acquisition functions.

Pure numpy/scipy/scikit-learn/george/emcee: no Ray, no MLflow. Parallel work goes through the
executor passed in (``optfarm.optimizers.executor``).
"""

from .base import Optimizer, Param, ParameterError, Recommendation, Suggestion
from .executor import Executor, SerialExecutor
from .registry import available, get, make_optimizer

__all__ = [
    "Executor",
    "Optimizer",
    "Param",
    "ParameterError",
    "Recommendation",
    "SerialExecutor",
    "Suggestion",
    "available",
    "get",
    "make_optimizer",
]
