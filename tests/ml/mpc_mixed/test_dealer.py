"""Material: the dealer's split into shares, and party 0's seeded replay of recorded phases."""

import numpy as np
import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import data, material
from tessera_ml.algorithms.mpc_mixed.dealer import (
    FetchingProvider,
    SeededProvider,
    _bundle_bytes,
    _PhaseDraws,
    _split_bundle,
    bundle_generator,
    receive_seed,
    serve,
)
from tessera_ml.algorithms.mpc_mixed.local import share_inputs
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
from tessera_ml.algorithms.mpc_mixed.messages import Phase
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.prg import Prg
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.reference import PlainMlp
from tessera_ml.algorithms.mpc_mixed.request import END, MAX_FACTORS, Kind, Request
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import run_local
from tessera_ml.comm.peer import Peer, local_pair
from tessera_ml.worlds import run_world

SEED = bytes(range(32))

REQUESTS = [
    Request(Kind.MUL, 32, (3, 4), (4,)),
    Request(Kind.MATMUL, 64, (3, 4), (4, 2)),
    Request(Kind.TRUNC, 64, (5,), shift=8),
    Request(Kind.EXTEND, 64, (5,)),
    Request(Kind.COMPARE, 32, (6,)),
    Request(Kind.COMPARE, 32, (70,), fan_in=True),
    Request(Kind.COMPARE, 64, (3, 5), fan_in=True),
    Request(Kind.SELECT, 0, (6,), uses=(32, 64)),
    Request(Kind.NORM, 64, (8, 3)),
    Request(Kind.MATMUL_PAIR, 64, (5, 3), (3, 2)),
    Request(Kind.WIDE_MUL, 64, (4, 3)),
    Request(Kind.WIDE_MUL, 64, (4, 3), square=True),
    Request(Kind.WIDE_MATMUL, 64, (4, 3), (3, 2)),
    Request(Kind.PRODUCT, 32, (6, 2), bit_factors=(False, True, True)),
    Request(Kind.PRODUCT, 64, (5,), bit_factors=(True, False, True, False)),
    Request(Kind.COMPARE, 64, (4,)),
]


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
    raw = torch.zeros(_bundle_bytes([req]) + 8, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match="does not match the schedule"):
        _split_bundle(raw, [req], Prg.derived(SEED, 1))


def test_a_phase_drawn_at_once_has_the_shares_drawn_item_by_item() -> None:
    """Party 0's replay draws a whole phase from one call into the stream, and a bundle split
    while a phase is recorded (``_split_bundle``) draws party 1's masks the same way; the shares
    are those drawn item by item, whatever the slots' types and offsets (bit slots
    of odd lengths put later ring slots off their alignment, which copies them)."""
    reqs = REQUESTS * 2
    slots = [s for r in reqs for s in layout(r)]
    offsets = np.cumsum([0] + [material.slot_bytes(s) for s in slots])[:-1]
    assert any(o % s.dtype.itemsize for s, o in zip(slots, offsets, strict=True))  # misaligned
    phased = SeededProvider(SEED)
    phased.begin(7)
    for r in reqs:  # the first run records the schedule, item by item
        phased.get(r)
    phased.end()
    phased.begin(7)
    replayed = [phased.get(r) for r in reqs]
    phased.end()
    prg = bundle_generator(SEED, 7, 1)
    expected0 = [draw_share0(r, prg) for r in reqs]
    for got, want in zip(replayed, expected0, strict=True):
        assert len(got) == len(want)
        assert all(torch.equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want, strict=True))
    # party 1: the masks drawn at once, the rest cut from the dealer's bundle
    prg0, prg1 = Prg.derived(SEED, 0), Prg.derived(SEED, 1)
    dealt = [deal(r, prg0, prg1)[1] for r in reqs]
    raw = torch.cat(
        [
            dealt[k][i].contiguous().reshape(-1).view(torch.uint8)
            for k, r in enumerate(reqs)
            for i in sent(r)
        ]
    )
    split = _split_bundle(raw, reqs, Prg.derived(SEED, 1))
    for got, want in zip(split, dealt, strict=True):
        assert all(torch.equal(g, w) and g.dtype == w.dtype for g, w in zip(got, want, strict=True))


def test_the_dealer_draws_a_phase_at_once_and_sends_what_it_deals_item_by_item() -> None:
    """A replayed phase's bundle, made from both parties' shares drawn at once into buffers
    the next run refills, is the bundle ``deal`` makes item by item from the same streams,
    misaligned slots included, run after run."""
    reqs = REQUESTS * 2
    draws = _PhaseDraws(reqs)
    seed1 = bytes(32)
    for run in range(3):
        prg0, prg1 = bundle_generator(SEED, 4, run), bundle_generator(seed1, 4, run)
        dealt = [deal(r, prg0, prg1)[1] for r in reqs]
        expected = torch.cat(
            [
                dealt[k][i].contiguous().reshape(-1).view(torch.uint8)
                for k, r in enumerate(reqs)
                for i in sent(r)
            ]
        )
        made = draws.bundle(bundle_generator(SEED, 4, run), bundle_generator(seed1, 4, run))
        assert made.numel() == _bundle_bytes(reqs)
        assert torch.equal(made, expected)


def test_a_slot_buffer_refills_the_same_tensors_with_each_runs_shares() -> None:
    """Drawn into a ``SlotBuffer``, a phase's shares are those ``random_share`` draws slot by
    slot from the same stream, misaligned ring slots (after odd-length bit slots) included; the
    next draw puts the stream's next values into the same tensors, and received bytes reach the
    misaligned slots' own tensors at ``refresh``."""
    slots = [s for r in REQUESTS * 2 for s in layout(r)]
    buffer = material.SlotBuffer(slots)
    assert buffer.size == sum(material.slot_bytes(s) for s in slots) == buffer.raw.numel()
    prg, twin = Prg.derived(SEED, 9), Prg.derived(SEED, 9)
    first = buffer.draw(prg)
    kept = [t.clone() for t in first]
    for run in range(2):
        expected = [material.random_share(slot, twin) for slot in slots]
        got = first if run == 0 else buffer.draw(prg)
        assert all(g is f for g, f in zip(got, first, strict=True))
        for g, w, slot in zip(got, expected, slots, strict=True):
            assert torch.equal(g, w) and g.shape == slot.shape and g.dtype == slot.dtype
    assert not any(torch.equal(k, g) for k, g in zip(kept, first, strict=True) if k.numel() > 8)
    # bytes received into raw: the dealer's layout, end to end
    other = Prg.derived(SEED, 10)
    dealt = [material.random_share(slot, other) for slot in slots]
    buffer.raw.copy_(torch.cat([t.reshape(-1).view(torch.uint8) for t in dealt]))
    assert all(torch.equal(g, w) for g, w in zip(buffer.refresh(), dealt, strict=True))


def _train_in_process(comm: Communicator, pair: tuple[Peer, Peer], steps: int) -> object:
    """Dealer (rank 0) and both compute parties (ranks 1, 2) as threads: ``steps`` training
    steps of the digits MLP, each step's material asked for during the step before."""
    if comm.rank == 0:
        return serve(comm, 1, 2)
    index = comm.rank - 1
    seed = receive_seed(comm, 0)
    provider = SeededProvider(seed) if index == 0 else FetchingProvider(comm, 0, seed)
    eng = Engine(index, pair[index], provider, "tree", "local")
    prec = Precision.of("mixed", 12, 20)
    feats, (labels, classes) = data.features("sklearn:digits"), data.labels("sklearn:digits")
    onehot = torch.nn.functional.one_hot(labels.train, classes).double()
    model = SharedMlp.from_plain(eng, init_params([64, 8, classes], True, 0), prec.backward, True)
    batches = data.batches(feats.train.shape[0], 32, 0, 0)[:steps]
    outputs: dict[str, torch.Tensor] = {}
    for step, idx in enumerate(batches):
        xf, xb, yb = share_inputs(prec, feats.train[idx], onehot[idx], step)
        provider.begin(Phase.TRAIN, ahead=step + 1 < steps)
        outputs[f"probs{step}"] = train_step(eng, prec, model, xf[index], xb[index], yb[index], 0.5)
        provider.end()
    provider.close()
    buffers = (
        [provider._buffers[Phase.TRAIN][0]]
        if isinstance(provider, SeededProvider)
        else [provider._buffers[Phase.TRAIN].masks, *provider._buffers[Phase.TRAIN].received]
    )
    held = {b.raw.untyped_storage().data_ptr() for b in buffers}
    kept = {**model.params, **outputs}
    in_buffers = [k for k, v in kept.items() if v.untyped_storage().data_ptr() in held]
    return {k: v.clone() for k, v in model.params.items()}, in_buffers


def test_training_keeps_nothing_in_the_buffers_the_next_step_refills() -> None:
    """The compute parties train on material replayed into the same buffers every step: the
    weights and running statistics after four steps, and each step's outputs, hold none of that
    memory, and revealed they are the plaintext reference's up to fixed-point error."""
    steps = 4
    _, (params0, held0), (params1, held1) = run_local(
        _train_in_process, 3, local_pair(), steps, timeout_s=300
    )
    assert held0 == held1 == []
    prec = Precision.of("mixed", 12, 20)
    feats, (labels, classes) = data.features("sklearn:digits"), data.labels("sklearn:digits")
    ref = PlainMlp(init_params([64, 8, classes], True, 0), True)
    onehot = torch.nn.functional.one_hot(labels.train, classes).double()
    for idx in data.batches(feats.train.shape[0], 32, 0, 0)[:steps]:
        ref.train_step(feats.train[idx], onehot[idx], 0.5)
    for name, value in ref.p.items():
        revealed = prec.backward.decode(params0[name] + params1[name])
        assert torch.allclose(revealed, value, atol=0.03), name
