"""The load-balancing strategies, pure: CHWBL's affinity and bounded loads, PrefixLoad's trade
of cache affinity against queue depth, LeastLoad, RoundRobin, and the request keys."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from muster.gateway.routing import PREFIX_BLOCK, Chwbl, RequestKey, Router, prefix_blocks, request_key


@dataclass
class R:
    name: str
    inflight: int = 0


def replicas(n: int) -> list[R]:
    return [R(f"r{i}") for i in range(n)]


def test_chwbl_sends_one_key_to_one_replica_and_spreads_keys():
    rs = replicas(4)
    ring = Chwbl([r.name for r in rs])
    assert len({ring.pick("user-7 system prompt", rs).name for _ in range(20)}) == 1
    owners = {ring.pick(f"key-{i}", rs).name for i in range(200)}
    assert owners == {"r0", "r1", "r2", "r3"}


def test_chwbl_skips_a_replica_over_the_load_bound_and_keeps_the_others_keys():
    rs = replicas(4)
    ring = Chwbl([r.name for r in rs], load_factor=1.25)
    owner = ring.pick("hot", rs)
    owner.inflight = 5  # total 5: the bound is 1.25 * 6 / 4 = 1.9
    other = ring.pick("hot", rs)
    assert other is not owner and other.inflight == 0
    before = {k: ring.pick(k, [r for r in rs if r is not owner]).name for k in map(str, range(50))}
    # keys that never belonged to the busy replica do not move
    assert all(
        ring.pick(k, rs).name == v for k, v in before.items() if ring.pick(k, [*rs]).name != owner.name
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 20), min_size=2, max_size=6), st.text(min_size=1, max_size=30))
def test_chwbl_never_picks_past_the_bound_when_one_is_within_it(loads, key):
    rs = [R(f"r{i}", load) for i, load in enumerate(loads)]
    chosen = Chwbl([r.name for r in rs]).pick(key, rs)
    total = sum(loads)
    bound = 1.25 * (total + 1) / len(rs)
    if total and any(r.inflight + 1 <= bound for r in rs):
        assert chosen.inflight + 1 <= bound


def test_prefix_load_keeps_a_prefix_on_its_replica_until_the_queue_costs_more():
    rs = replicas(2)
    router = Router("PrefixLoad")
    shared = "You are a helpful assistant. " * 40  # ~1200 characters
    first = router.pick(RequestKey(shared + "q1"), rs)
    assert router.cached_chars(first.name, RequestKey(shared + "q2")) >= len(shared) - PREFIX_BLOCK
    first.inflight = 1
    assert router.pick(RequestKey(shared + "q2"), rs) is first  # affinity beats one queued request
    first.inflight = 50
    assert router.pick(RequestKey(shared + "q3"), rs) is not first  # a long queue is worse than a cold cache
    fresh = "Something else entirely. " * 40
    for r in rs:
        r.inflight = 0
    rs[0].inflight, rs[1].inflight = 3, 0
    assert router.pick(RequestKey(fresh), rs).name == "r1"  # nothing cached anywhere: the idle one


def test_least_load_and_round_robin():
    rs = [R("a", 3), R("b", 1), R("c", 2)]
    assert Router("LeastLoad").pick(RequestKey(), rs).name == "b"
    rr = Router("RoundRobin")
    assert [rr.pick(RequestKey(), rs).name for _ in range(6)] == ["b", "c", "a", "b", "c", "a"]


def test_prefix_hash_ring_follows_the_members():
    router = Router("PrefixHash")
    rs = replicas(3)
    router.set_members([r.name for r in rs])
    owner = router.pick(request_key({"prompt": "abc" * 50}, 100), rs)
    assert router.pick(request_key({"prompt": "abc" * 50 + "different tail"}, 100), rs) is owner
    # at capacity (not a candidate): another replica takes it, the ring stays
    others = [r for r in rs if r is not owner]
    assert router.pick(request_key({"prompt": "abc" * 50}, 100), others) in others


def test_request_keys_of_chat_and_completions():
    chat = {
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Hello there"}]},
        ]
    }
    key = request_key(chat, 5)
    assert key.hash_key == "Hello" and key.text.startswith("system:Be brief.")
    assert request_key({"prompt": ["first", "second"]}, 3).hash_key == "fir"
    assert request_key({"input": "embed me"}, 100).text == "embed me"
    assert len(prefix_blocks("x" * (PREFIX_BLOCK * 3 + 5))) == 3
    assert prefix_blocks("a" * 64) != prefix_blocks("b" * 64)
    # chained: the same block after a different prefix is a different block
    assert prefix_blocks("a" * 64 + "c" * 64)[1] != prefix_blocks("b" * 64 + "c" * 64)[1]
