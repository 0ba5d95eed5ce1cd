"""`muster up` options that configure the manager."""

from __future__ import annotations

from muster.cli import up
from muster.scheduler import PLACEMENT_POLICIES


def test_placement_choices_are_the_schedulers():
    assert up._PLACEMENTS == PLACEMENT_POLICIES
