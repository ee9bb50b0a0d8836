"""Material: the dealer's split into shares, and party 0's seeded replay of recorded phases."""

import numpy as np
import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import material
from tessera_ml.algorithms.mpc_mixed.dealer import (
    bundle_bytes,
    bundle_generator,
    receive_seed,
    serve,
)
from tessera_ml.algorithms.mpc_mixed.material import (
    deal,
    draw_share0,
    free,
    layout,
    random_shares,
    secrets,
    sent,
)
from tessera_ml.algorithms.mpc_mixed.material_beaver import Mul, Square
from tessera_ml.algorithms.mpc_mixed.material_kind import Masks, Slot
from tessera_ml.algorithms.mpc_mixed.prg import Prg
from tessera_ml.algorithms.mpc_mixed.providers import (
    FetchingProvider,
    SeededProvider,
    _split_bundle,
)
from tessera_ml.algorithms.mpc_mixed.request import END, MAX_FACTORS, Kind, Request
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import run_local
from tessera_ml.worlds import run_world

from .material_items import REQUESTS, SEED


def recombine(slot: Slot, s0: torch.Tensor, s1: torch.Tensor) -> torch.Tensor:
    return s0 ^ s1 if slot.binary else s0 + s1


class _Given(Masks):
    def __init__(self, masks: list[torch.Tensor]) -> None:
        self._masks = iter(masks)

    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        mask = next(self._masks)
        assert mask.shape == shape and mask.dtype == dtype
        return mask


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: r.kind.name)
def test_party_1_draws_its_shares_of_the_masks_and_receives_what_is_computed_from_them(
    req: Request,
) -> None:
    share0, share1 = deal(req, Prg.derived(SEED, 0), Prg.derived(SEED, 1))
    slots = layout(req)
    assert sorted(free(req) + sent(req)) == list(range(len(slots))) and free(req)
    for slot, s0, s1 in zip(slots, share0, share1, strict=True):
        assert s0.shape == s1.shape == slot.shape and s0.dtype == s1.dtype == slot.dtype
    assert Request.decode(req.encode()) == req
    # party 1's shares of the masks are what it draws from the seed it shares with the dealer
    mine = random_shares([slots[i] for i in free(req)], Prg.derived(SEED, 1))
    assert all(torch.equal(share1[i], m) for i, m in zip(free(req), mine, strict=True))
    # every other slot is what the item's kind computes from those masks
    values = [recombine(*triple) for triple in zip(slots, share0, share1, strict=True)]
    again = secrets(req, _Given([values[i] for i in free(req)]))
    assert all(torch.equal(a, v) for a, v in zip(again, values, strict=True))
    # and the masks are party 0's seeded shares plus party 1's: neither seed alone fixes them
    for labels0, labels1 in ((0, 2), (3, 1)):  # one party's stream kept, the other's changed
        again0, again1 = deal(req, Prg.derived(SEED, labels0), Prg.derived(SEED, labels1))
        masks = [recombine(slots[i], again0[i], again1[i]) for i in free(req)]
        assert not all(torch.equal(m, values[i]) for m, i in zip(masks, free(req), strict=True))


def test_products_in_the_material_are_products_of_its_masks() -> None:
    a, b, c = secrets(REQUESTS[1], Prg.derived(SEED, 3))
    assert torch.equal(c, a @ b)
    r, high, msb = secrets(REQUESTS[2], Prg.derived(SEED, 3))
    assert torch.equal(high, (r >> 8) & ((1 << 56) - 1)) and torch.equal(msb, (r < 0).long())


def test_a_product_item_holds_the_product_of_every_subset_of_its_masks() -> None:
    req = Request(Kind.PRODUCT, 64, (5,), bit_factors=(True, False, True, False))
    values = secrets(req, Prg.derived(SEED, 4))
    bits, subsets = values[:2], values[2:]
    assert len(subsets) == 2**4 - 1 and all(b.dtype == torch.uint8 for b in bits)
    masks = [subsets[0], subsets[1], subsets[3], subsets[7]]  # the single factors
    assert torch.equal(masks[0], bits[0].long()) and torch.equal(masks[2], bits[1].long())
    for subset in range(1, 16):
        expected = torch.ones(5, dtype=torch.int64)
        for i in range(4):
            if subset >> i & 1:
                expected = expected * masks[i]
        assert torch.equal(subsets[subset - 1], expected)


def test_replayed_phases_draw_the_same_shares_as_recorded_ones() -> None:
    """Each run of a phase draws from its own (seed, phase, run) generator, recorded or replayed,
    whatever phases ran in between."""
    phased = SeededProvider(SEED)
    seen: dict[tuple[int, int], list[torch.Tensor]] = {}
    for run in range(3):  # record once, then prepare ahead twice, with another phase between
        for key in (1, 2):
            phased.begin(key)
            # copies: a replayed run's tensors are refilled by the phase's next run
            seen[key, run] = [t.clone() for r in REQUESTS for t in phased.get(r)]
            phased.end()
    for (key, run), shares in seen.items():
        prg = bundle_generator(SEED, key, run)
        expected = [t for r in REQUESTS for t in draw_share0(r, prg)]
        assert all(torch.equal(a, b) for a, b in zip(shares, expected, strict=True))
    assert not torch.equal(seen[1, 1][0], seen[1, 2][0])
    phased.begin(1)
    phased.get(REQUESTS[0])
    with pytest.raises(RuntimeError, match="deviates"):
        phased.get(REQUESTS[0])


PHASES = (1, 1, 2, 1, 2, 1)
PARTIES = ["dealer-co", "alice", "bob"]


@pytest.mark.parametrize(
    ("ahead", "parties"),
    [
        ("never", None),
        ("following", None),
        ("following", PARTIES),
        ("always", PARTIES),
        ("following", "in-process"),
    ],
    ids=[
        "one-world",
        "ahead-one-world",
        "ahead-tls-between-parties",
        "ahead-past-the-end",
        "ahead-in-process",
    ],
)
def test_the_dealer_serves_a_phase_made_before_it_was_asked_for(
    ahead: str, parties: list[str] | str | None
) -> None:
    """A real three-process world (dealer, party 0, party 1): the dealer hands party 1 bundles it
    made while the previous run of their phase was in use, with another phase between, and
    every item recombines with party 0's shares into correlated material. Asked for ahead,
    the next run's bundle is on its way while a run computes, and bundles of the other phase
    asked for meanwhile still reach the right run; bundles no run took are received at close.
    A run's shares hold until the next run of their phase begins, the next bundle arriving in
    a buffer of its own."""
    if parties == "in-process":  # threads, whose receives wait only when asked to
        results = run_local(_dealer_world, 3, ahead)
    else:
        results = run_world(_dealer_world, 3, ahead, parties=parties)
    served, (shares0, _), (shares1, coming, buffers) = results
    # a second buffer only for a phase asked for ahead during one of its runs
    assert (
        buffers == {"never": {1: 1, 2: 1}, "following": {1: 2, 2: 1}, "always": {1: 2, 2: 2}}[ahead]
    )
    extra = 2 if ahead == "always" else 0  # the last runs of phases 1 and 2 asked for one more
    assert served == {"items": len(REQUESTS) * (len(PHASES) + extra)}
    if ahead == "never":
        assert coming == [[]] * len(PHASES)
    else:
        # on its way after each run: the next run of each phase asked for ahead (a recorded
        # run asks when its schedule is known, at its end; a replayed one as it begins)
        last = [[1, 2], [1, 2]] if ahead == "always" else [[1], []]
        assert coming == [[1], [1], [1, 2], [1, 2], *last]
    for run0, run1 in zip(shares0, shares1, strict=True):
        for req, s0, s1 in zip(REQUESTS, run0, run1, strict=True):
            slots = layout(req)
            pairs = zip(slots, s0, s1, strict=True)
            values = [torch.from_numpy(a ^ b if o.binary else a + b) for o, a, b in pairs]
            # every slot is what the kind computes from the item's masks, the received slots
            # that lie off their type's alignment in the bundle included
            again = secrets(req, _Given([values[i] for i in free(req)]))
            assert all(torch.equal(a, v) for a, v in zip(again, values, strict=True)), req
            if req.kind is Kind.MATMUL:
                assert torch.equal(values[2], values[0] @ values[1])
            if req.kind is Kind.TRUNC:
                assert torch.equal(values[1], (values[0] >> 8) & ((1 << 56) - 1))
    assert not np.array_equal(shares1[1][1][0], shares1[3][1][0])  # fresh material every run


def _dealer_world(comm: Communicator, ahead: str) -> object:
    if comm.rank == 0:
        return serve(comm, 1, 2)
    provider = (
        SeededProvider(receive_seed(comm, 0))
        if comm.rank == 1
        else FetchingProvider(comm, 0, receive_seed(comm, 0))
    )
    runs: list[list[list[np.ndarray]]] = []  # by value: tensors would travel as shared memory
    coming: list[list[int]] = []
    last: dict[int, tuple[list[torch.Tensor], list[np.ndarray]]] = {}  # per phase, its last run
    for i, key in enumerate(PHASES):
        if isinstance(provider, FetchingProvider):
            provider._arrive()  # the bundles asked for ahead are in their buffers by now
        for shares, values in last.values():  # every phase's last run holds until its next
            assert all(np.array_equal(t.numpy(), v) for t, v in zip(shares, values, strict=True))
        follows = ahead == "always" or (ahead == "following" and key in PHASES[i + 1 :])
        provider.begin(key, ahead=follows)
        shares = [t for r in REQUESTS for t in provider.get(r)]
        last[key] = shares, [t.numpy().copy() for t in shares]
        tensors = iter(shares)
        runs.append([[next(tensors).numpy().copy() for _ in layout(r)] for r in REQUESTS])
        provider.end()
        coming.append(sorted(getattr(provider, "_coming", {})))
    provider.close()
    if isinstance(provider, FetchingProvider):  # bundles' buffers per phase
        return runs, coming, {k: len(b.received) for k, b in provider._buffers.items()}
    return runs, coming


def test_the_wire_form_round_trips_every_field() -> None:
    requests = [
        *REQUESTS,
        Request(Kind.TRUNC, 32, (2, 3, 4), shift=31),
        Request(Kind.EXTEND, 64, (7,), shift=30),
        Request(Kind.COMPARE, 64, (9,), fan_in=False),
        Request(Kind.SELECT, 0, (2, 2), uses=(64,)),
        Request(Kind.PRODUCT, 64, (1,), bit_factors=(True,)),
        Request(Kind.PRODUCT, 64, (1,), bit_factors=(False,) * MAX_FACTORS),
        Request(Kind.PRODUCT, 32, (4,), bit_factors=(True,) * MAX_FACTORS),
        Request(Kind.PRODUCT, 32, (4,), bit_factors=(True, False, False, True, False, True)),
    ]
    for req in requests:
        wire = req.encode()
        assert wire.dtype == torch.int64 and wire.shape == END.shape
        assert Request.decode(wire) == req
    assert Request.decode(END) is None


def test_the_wire_form_keeps_its_words() -> None:
    """Kind, ring, one parameter word, then each tuple behind its length, zero-padded."""

    def words(req: Request) -> list[int]:
        return [int(w) for w in req.encode().tolist()]

    assert words(Request(Kind.TRUNC, 64, (5,), shift=8))[:8] == [4, 64, 8, 1, 5, 0, 0, 0]
    assert words(Request(Kind.COMPARE, 32, (70,), fan_in=True))[:3] == [6, 32, 1]
    assert words(Request(Kind.COMPARE, 32, (70,)))[:3] == [6, 32, 0]
    assert words(Request(Kind.WIDE_MUL, 64, (4, 3), square=True))[:3] == [11, 64, 1]
    # factor count in the low byte, the bit factors' mask above it
    product = Request(Kind.PRODUCT, 32, (6, 2), bit_factors=(False, True, True))
    assert words(product)[:3] == [13, 32, 3 | 0b110 << 8]
    select = words(Request(Kind.SELECT, 0, (6,), uses=(32, 64)))
    assert select == [7, 0, 0, 1, 6, 0, 2, 32, 64] + [0] * 15
    matmul = words(Request(Kind.MATMUL, 64, (3, 4), (4, 2)))
    assert matmul == [2, 64, 0, 2, 3, 4, 2, 4, 2, 0] + [0] * 14


def test_a_field_the_kind_does_not_take_is_refused() -> None:
    strays = [
        Request(Kind.MUL, 32, (3,), (3,), shift=2),
        Request(Kind.TRUNC, 32, (3,), square=True),
        Request(Kind.WIDE_MUL, 64, (3,), fan_in=True),
    ]
    for req in strays:
        with pytest.raises(ValueError, match="does not take"):
            req.encode()
    for count in (0, MAX_FACTORS + 1):
        with pytest.raises(ValueError, match="factors"):
            Request(Kind.PRODUCT, 32, (3,), bit_factors=(False,) * count)


def test_material_drawn_outside_its_layout_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    class Lopsided(Square):
        def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
            return super().draw(req, masks)[:1]

    monkeypatch.setitem(material.KINDS, Kind.SQUARE, Lopsided())
    with pytest.raises(RuntimeError, match="outside its layout"):
        secrets(Request(Kind.SQUARE, 32, (4,)), Prg.derived(SEED, 0))


class _Broken(Mul):
    """A product kind whose masks disagree with what it declares."""

    def __init__(self, declared: list[int], change_mask: bool = False) -> None:
        self.declared, self.change_mask = declared, change_mask

    def free(self, req: Request) -> list[int]:
        return self.declared

    def draw(self, req: Request, masks: Masks) -> list[torch.Tensor]:
        a, b, c = super().draw(req, masks)
        return [a + 1 if self.change_mask else a, b, c]


@pytest.mark.parametrize(
    ("kind", "error"),
    [
        (_Broken([0]), "took more masks than its free slots"),
        (_Broken([0, 1, 2]), "left some of its masks untaken"),
        (_Broken([1, 0]), "does not fit slot 1"),
        (_Broken([0, 1], change_mask=True), "changed its mask in slot 0"),
    ],
)
def test_a_kind_whose_masks_disagree_with_its_free_slots_is_refused(
    kind: Mul, error: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(material.KINDS, Kind.MUL, kind)
    req = Request(Kind.MUL, 64, (3, 4), (4,))
    with pytest.raises(RuntimeError, match=error):
        deal(req, Prg.derived(SEED, 0), Prg.derived(SEED, 1))


def test_a_bundle_of_the_wrong_size_is_refused() -> None:
    req = REQUESTS[1]
    raw = torch.zeros(bundle_bytes([req]) + 8, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="does not match the schedule"):
        _split_bundle(raw, [req], Prg.derived(SEED, 1))
