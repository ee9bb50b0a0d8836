"""Buffers a replayed phase refills every run: each party's draws at once, the dealer's, party
1's received bundles, and training that keeps none of them."""

import numpy as np
import pytest
import torch

from tessera_ml.algorithms.mpc_mixed import data, material
from tessera_ml.algorithms.mpc_mixed.dealer import (
    _PhaseDraws,
    bundle_bytes,
    bundle_generator,
    receive_seed,
    serve,
)
from tessera_ml.algorithms.mpc_mixed.local import share_inputs
from tessera_ml.algorithms.mpc_mixed.material import (
    deal,
    deal_drawn,
    draw_share0,
    layout,
    sent,
)
from tessera_ml.algorithms.mpc_mixed.messages import Phase
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.prg import Prg
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.algorithms.mpc_mixed.providers import (
    FetchingProvider,
    SeededProvider,
    _split_bundle,
)
from tessera_ml.algorithms.mpc_mixed.request import Request
from tessera_ml.bench.mpc_mixed.reference import PlainMlp
from tessera_ml.comm.base import Communicator
from tessera_ml.comm.local import run_local
from tessera_ml.comm.peer import Peer, local_pair

from .material_items import REQUESTS, SEED


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
        assert made.numel() == bundle_bytes(reqs)
        assert torch.equal(made, expected)


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: f"{r.kind.name}-{r.bits}")
def test_dealt_shares_written_into_given_tensors_are_those_dealt_alone(req: Request) -> None:
    """With ``into``, each sent slot's share is written into its tensor (where the dealer's
    bundle lays it out) and is the share ``deal_drawn`` makes without it; places for another
    number of slots are refused."""
    slots = layout(req)
    share0 = [material.random_share(slot, Prg.derived(SEED, 1)) for slot in slots]
    masks1 = [material.random_share(slots[i], Prg.derived(SEED, 2)) for i in material.free(req)]
    alone = deal_drawn(req, share0, masks1)[1]
    into = [torch.empty(slots[i].shape, dtype=slots[i].dtype) for i in sent(req)]
    written = deal_drawn(req, share0, masks1, into)[1]
    for i, target in zip(sent(req), into, strict=True):
        assert written[i] is target and torch.equal(target, alone[i])
    with pytest.raises(ValueError, match="places for other slots"):
        deal_drawn(req, share0, masks1, into + into[:1])


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


def test_a_phase_buffer_is_cut_back_into_its_items_in_order_and_only_whole() -> None:
    tensors = [torch.full((1,), i) for i in range(6)]
    items = material.grouped(tensors, [2, 0, 3, 1])
    assert [[int(t) for t in item] for item in items] == [[0, 1], [], [2, 3, 4], [5]]
    assert all(t is tensors[int(t)] for item in items for t in item)  # the buffer's own views
    with pytest.raises(ValueError, match="6 tensors do not make items of 5"):
        material.grouped(tensors, [2, 3])
