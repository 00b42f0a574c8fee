"""The fault suite's summary numbers (tests/fault/summary.py) never fail a run: on empty
or odd data they read ``n/a``."""

from __future__ import annotations

import math

import pytest

from .fault.summary import NONE, maximum, median, ms, nth


@pytest.mark.parametrize(
    "values", [[], (), iter([]), [math.nan], [math.inf, -math.inf], ["x", None, True]]
)
def test_nothing_to_summarise_reads_n_a(values: object) -> None:
    assert median(values) == NONE  # type: ignore[arg-type]
    assert maximum(values) == NONE  # type: ignore[arg-type]


def test_numbers_are_summarised_and_odd_entries_skipped() -> None:
    assert median([3.0, 1.0, 2.0]) == "2.00"
    assert median([1, 2], 3) == "1.500"
    assert maximum([0.5, math.nan, 2, "x"]) == "2.00"


def test_percentiles_of_an_empty_list_are_none() -> None:
    assert nth([], 0.99) is None and ms(None) == NONE
    pings = [0.001 * i for i in range(1, 101)]
    assert nth(pings, 0.5) == pings[50] and nth(pings, 1.0) == pings[-1]
    assert ms(nth(pings, 0.0)) == "1.00"
