"""optfarm.oracle.spelling.did_you_mean: close matches, short enough to end a one-line error."""

from optfarm.oracle.spelling import did_you_mean


def test_close_matches_are_suggested():
    assert did_you_mean("seed", ["seeds", "datasets", "optimizers"]) == " (did you mean 'seeds'?)"
    assert did_you_mean("lynceu", ["lynceus", "obol", "random"]) == " (did you mean 'lynceus'?)"
    assert (
        did_you_mean("scout-join", ["scout-join_bigdata_spark", "trimtuner-cnn"])
        == " (did you mean 'scout-join_bigdata_spark'?)"
    )  # a prefix of exactly one name


def test_no_suggestion_for_a_word_like_none_of_them():
    assert did_you_mean("zzz", ["seeds", "datasets"]) == ""
    many = [f"scout-{w}" for w in ("join", "kmeans", "lr", "pagerank", "sort")]
    assert did_you_mean("scout-x", many).count("'") == 4  # at most two names: one short line
