"""How many blocks (tables, or one table's seeds) a paired comparison needs: the power of
the Wilcoxon signed-rank test the leaderboard separates pairs with
(``optfarm.farm.stats.ranks.wilcoxon_holm``), estimated from the observed effect and spread.

The signed-rank test is approximated by the paired t-test on ``n x ARE`` blocks, with ARE
= 3 / pi its asymptotic relative efficiency under normal differences (Hodges & Lehmann
1956): the power of a two-sided t-test of ``n`` differences of mean ``effect`` and standard
deviation ``spread`` is that of a noncentral t with ``n - 1`` degrees of freedom and
noncentrality ``effect / spread x sqrt(n)`` (Cohen 1988, ch. 2). Below ``log2(2 / alpha)``
blocks the exact signed-rank test cannot reach ``alpha`` at all (its smallest p-value with
every difference of one sign is 2 / 2^n), whatever the effect.
"""

from __future__ import annotations

import math

from scipy.stats import nct, norm
from scipy.stats import t as student_t

__all__ = ["ARE_SIGNED_RANK", "blocks_needed", "signed_rank_power"]

ARE_SIGNED_RANK = 3.0 / math.pi
MOST = 100_000  # beyond this, "more than"


def signed_rank_power(n: int, effect: float, spread: float, alpha: float = 0.05) -> float:
    """The power of the two-sided signed-rank test at ``alpha`` over ``n`` paired
    differences of mean ``effect`` and standard deviation ``spread`` > 0. Where scipy's
    noncentral t gives no number (a noncentrality of dozens), the normal approximation of
    it (Cohen 1988, ch. 2), there all but 1."""
    if n < math.log2(2.0 / alpha):
        return 0.0
    m = n * ARE_SIGNED_RANK
    df = max(m - 1.0, 1.0)
    crit = student_t.ppf(1.0 - alpha / 2.0, df)
    shift = abs(effect) / spread * math.sqrt(m)
    power = float(nct.sf(crit, df, shift) + nct.cdf(-crit, df, shift))
    return power if math.isfinite(power) else float(norm.sf(crit - shift) + norm.cdf(-crit - shift))


def blocks_needed(
    effect: float, spread: float, alpha: float = 0.05, power: float = 0.8
) -> int | None:
    """The smallest number of blocks at which the signed-rank test detects ``effect`` with
    ``power`` (from a normal-approximation guess upwards, by doubling and bisection: the
    power grows with the blocks); None for no effect, or more than ``MOST`` blocks. A
    spread of 0 (every block the same difference) needs only the blocks the exact test
    needs to reach ``alpha``."""
    if not math.isfinite(effect) or effect == 0:
        return None
    smallest = math.ceil(math.log2(2.0 / alpha))
    if spread <= 0:
        return smallest
    guess = ((norm.ppf(1 - alpha / 2) + norm.ppf(power)) * spread / abs(effect)) ** 2
    low = max(smallest, int(0.8 * guess / ARE_SIGNED_RANK))
    if low > MOST:
        return None

    def enough(n: int) -> bool:
        return signed_rank_power(n, effect, spread, alpha) >= power

    if enough(low):
        return low
    high = low  # the power grows with n: double past it, then halve the gap
    while not enough(high):
        if high >= MOST:
            return None
        low, high = high, min(2 * high, MOST)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle, high)
    return high
