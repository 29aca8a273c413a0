"""Fit screen pieces."""

from __future__ import annotations

from harness.decision.rules.fit import reuse_share


def test_reuse_share_counts_leading_repeats_only() -> None:
    share, blocks = reuse_share([[1, 2, 3], [1, 2, 4], [5, 2, 3]])
    assert blocks == 9
    assert share == 2 / 9  # [1,2] reused in the second request; the third starts with a new block


def test_reuse_share_empty() -> None:
    assert reuse_share([]) == (None, 0)
