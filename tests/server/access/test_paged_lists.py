"""A caller who may see only some objects gets full pages of just those (the list filter pages too)."""

from __future__ import annotations

from muster.sdk.client import Client
from muster.testing.server import RunningServer
from muster.testing.tenancy import sample

Clients = dict[str, Client]


def test_a_filtered_list_pages_with_the_same_guarantees(teams: tuple[RunningServer, Clients]):
    _running, clients = teams
    admin, alice, bob = clients["admin"], clients["alice"], clients["bob"]
    # Interleaved so that a page of alice's must read past rows she may not see.
    for i in range(7):
        for ns in ("default", "team-a", "team-b"):
            admin.create(sample("TrainingJob", f"paged-{i}", ns))
    mine = [f"paged-{i}" for i in range(7)]

    pages = list(alice.list_pages("TrainingJob", limit=3))  # every namespace she may see: team-a's
    assert [[o["metadata"]["namespace"] for o in p["items"]] for p in pages] == [["team-a"] * 3] * 2 + [
        ["team-a"]
    ]
    assert [o["metadata"]["name"] for p in pages for o in p["items"]] == mine
    assert all("continue" in p["metadata"] for p in pages[:-1]) and "continue" not in pages[-1]["metadata"]

    # Changes between pages (the iterator fetches a page when it is taken): present
    # throughout, listed once; deleted ahead of the cursor or created behind it, not listed.
    paging = alice.list_pages("TrainingJob", limit=3)
    first = next(paging)
    admin.delete("TrainingJob", "paged-5", "team-a")
    admin.create(sample("TrainingJob", "paged-0a", "team-a"))
    admin.create(sample("TrainingJob", "paged-9", "team-b"))  # ahead, but not hers
    listed = [o["metadata"]["name"] for p in [first, *paging] for o in p["items"]]
    assert listed == [n for n in mine if n != "paged-5"]

    everyone = [o["metadata"]["name"] for o in bob.list("TrainingJob", chunk_size=2)["items"]]
    assert everyone == [*mine, "paged-9"]  # team-b's
