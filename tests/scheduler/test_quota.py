"""Kueue's quota arithmetic over the cohort tree (reference/schedulers.md §1.3)."""

from __future__ import annotations

import pytest

from muster.scheduler import Cohort, FlavorQuotas, ResourceGroup, ResourceQuota, Snapshot, SnapshotError
from muster.scheduler.quota import QuotaTree
from tests.scheduler.builders import cq, running

FR = ("default", "cpu")


def tree(*queues, cohorts=(), admitted=()) -> QuotaTree:
    return QuotaTree(Snapshot(cluster_queues=list(queues), cohorts=list(cohorts), admitted=list(admitted)))


def test_flat_cohort_available_and_potential() -> None:
    t = tree(
        cq("a", {"cpu": ResourceQuota(6, borrowing_limit=2)}, cohort="c"),
        cq("b", {"cpu": ResourceQuota(6, lending_limit=4)}, cohort="c"),
        admitted=[running("x", "a", cpu=5), running("y", "b", cpu=3)],
    )
    a, b = t.queues["a"], t.queues["b"]
    c = t.cohorts["c"]
    assert b.local_quota(FR) == 2  # 6 - lendingLimit 4 is never lent
    assert c.subtree[FR] == 6 + 4
    assert c.usage[FR] == 5 + max(0, 3 - 2)
    assert t.available(c, FR) == 10 - 6
    # a: nothing local, the cohort's 4, capped by its borrowing limit: 6 - 0 - 5 + 2 = 3
    assert t.available(a, FR) == 3
    # b: 0 local left (3 used of 2 local), plus the cohort's 4
    assert t.available(b, FR) == 0 + 4
    assert t.potential_available(a, FR) == min(0 + 10, 6 + 2)
    assert t.potential_available(b, FR) == 2 + 10


def test_usage_bubbles_only_beyond_local_quota() -> None:
    t = tree(cq("b", {"cpu": ResourceQuota(6, lending_limit=4)}, cohort="c"))
    b, c = t.queues["b"], t.cohorts["c"]
    t.add_usage(b, FR, 2)
    assert c.usage.get(FR, 0) == 0  # within the 2 b keeps for itself
    t.add_usage(b, FR, 3)
    assert c.usage[FR] == 3
    t.add_usage(b, FR, -5)
    assert b.usage[FR] == 0 and c.usage[FR] == 0


def test_hierarchy_with_cohort_quota() -> None:
    groups = [ResourceGroup(("cpu",), [FlavorQuotas("default", {"cpu": ResourceQuota(2)})])]
    t = tree(
        cq("q", {"cpu": 0}, cohort="child"),
        cq("other", {"cpu": 2}, cohort="root"),
        cohorts=[Cohort("root"), Cohort("child", parent="root", resource_groups=groups)],
        admitted=[running("o", "other", cpu=2)],
    )
    q, child, root = t.queues["q"], t.cohorts["child"], t.cohorts["root"]
    assert child.subtree[FR] == 2 and root.subtree[FR] == 4
    assert t.available(q, FR) == 2
    assert t.height_of_lowest_subtree_that_fits(q, FR, 2) == (1, True)  # fits in child, below root
    assert t.height_of_lowest_subtree_that_fits(q, FR, 3) == (2, False)
    assert root.height() == 2


def test_no_cohort_is_a_root() -> None:
    t = tree(cq("solo", {"cpu": 4}), admitted=[running("w", "solo", cpu=3)])
    solo = t.queues["solo"]
    assert t.available(solo, FR) == 1
    assert t.potential_available(solo, FR) == 4
    assert t.height_of_lowest_subtree_that_fits(solo, FR, 5) == (0, False)
    assert t.fits(solo, {FR: 1}, allow_borrowing=False)
    assert not t.fits(solo, {FR: 2}, allow_borrowing=True)


def test_dominant_resource_share_with_weights() -> None:
    t = tree(
        cq("a", {"cpu": 3}, cohort="c"),
        cq("b", {"cpu": 3}, cohort="c", fair_weight=2.0),
        cq("z", {"cpu": 3}, cohort="c", fair_weight=0.0),
        admitted=[running("x", "a", cpu=5)],
    )
    a, b, z = t.queues["a"], t.queues["b"], t.queues["z"]
    assert t.dominant_share(a) == pytest.approx(2 * 1000 / 9)
    assert t.dominant_share(b, {FR: 5}) == pytest.approx(2 * 1000 / 9 / 2)
    assert t.dominant_share(b) == 0.0
    assert t.dominant_share(z, {FR: 4}) == float("inf")


def test_contradictions_are_snapshot_errors() -> None:
    with pytest.raises(SnapshotError, match="cycle"):
        tree(cq("q"), cohorts=[Cohort("x", parent="y"), Cohort("y", parent="x")])
    with pytest.raises(SnapshotError, match="defined twice"):
        tree(cq("q"), cq("q"))
    with pytest.raises(SnapshotError, match="unknown cluster queue"):
        tree(cq("q"), admitted=[running("w", "missing")])
