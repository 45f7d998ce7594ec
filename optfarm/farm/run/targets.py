"""The reach targets, named once: their labels (``cno<=1.1``, the key of every reach statistic,
``farm run --until`` and a sweep's ``until``), their thresholds, the headline target of each
quality metric, and the words figures, tables and ``farm run`` write for them.

CNO thresholds are those of Lynceus Fig. 4-5 (``cno<=1``: the optimum itself), Fig. 8's
look-ahead table reads ``cno<=1.1``; Accuracy_C's are fractions of the feasible optimum's:
90% is TrimTuner Fig. 1-2's, 98% the one at which its sub-sampling pays on trimtuner-cnn
(13-20% of the configurations there meet 90%; docs/results/ablations.md).
``metrics.meets_target`` says what meeting one means.
"""

from __future__ import annotations

__all__ = [
    "ACC_C_90",
    "ACC_C_98",
    "CNO_1_1",
    "CNO_2",
    "CNO_OPTIMUM",
    "HEADLINE",
    "REACH_TARGETS",
    "TARGET_LABELS",
    "target_text",
]

CNO_2, CNO_1_1, CNO_OPTIMUM = "cno<=2", "cno<=1.1", "cno<=1"
ACC_C_90, ACC_C_98 = "acc_c>=0.9opt", "acc_c>=0.98opt"

# quality metric -> {label: threshold}
REACH_TARGETS = {
    "cno": {CNO_2: 2.0, CNO_1_1: 1.1, CNO_OPTIMUM: 1.0},
    "accuracy_c": {ACC_C_90: 0.9, ACC_C_98: 0.98},
}
TARGET_LABELS = tuple(label for targets in REACH_TARGETS.values() for label in targets)
# the one target a single-number summary reads per metric (Lynceus Fig. 5b and 8, TrimTuner
# Fig. 1-2): the sensitivity analysis' reach, the look-ahead and pooled tables
HEADLINE = {"cno": CNO_1_1, "accuracy_c": ACC_C_90}

_TEXT = {
    CNO_2: "CNO <= 2",
    CNO_1_1: "CNO <= 1.1",
    CNO_OPTIMUM: "CNO <= 1 (the optimum)",
    ACC_C_90: "Accuracy_C >= 90% of the optimum's",
    ACC_C_98: "Accuracy_C >= 98% of the optimum's",
}


def target_text(label: str) -> str:
    """A reach target as figures, tables and ``farm run`` write it (``cno<=2`` -> ``CNO <=
    2``); another label as it is."""
    return _TEXT.get(label, label)
