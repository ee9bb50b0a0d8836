"""Material: the dealer's split into shares, and party 0's seeded replay of recorded phases."""

import pytest
import torch

from tessera_ml.algorithms.mpc_mixed.dealer import SeededProvider
from tessera_ml.algorithms.mpc_mixed.material import (
    Kind,
    Request,
    draw_share0,
    layout,
    product_request,
    secrets,
    split,
)

REQUESTS = [
    Request(Kind.MUL, 32, (3, 4), (4,)),
    Request(Kind.MATMUL, 64, (3, 4), (4, 2)),
    Request(Kind.TRUNC, 64, (5,), param=8),
    Request(Kind.EXTEND, 64, (5,)),
    Request(Kind.COMPARE, 32, (6,)),
    Request(Kind.COMPARE, 32, (70,), param=1),
    Request(Kind.COMPARE, 64, (3, 5), param=1),
    Request(Kind.SELECT, 0, (6,), uses=(32, 64)),
    Request(Kind.NORM, 64, (8, 3)),
    Request(Kind.MATMUL_PAIR, 64, (5, 3), (3, 2)),
    Request(Kind.WIDE_MUL, 64, (4, 3)),
    Request(Kind.WIDE_MUL, 64, (4, 3), param=1),
    Request(Kind.WIDE_MATMUL, 64, (4, 3), (3, 2)),
    product_request(32, (6, 2), [False, True, True]),
]


@pytest.mark.parametrize("req", REQUESTS, ids=lambda r: r.kind.name)
def test_shares_recombine_to_the_dealers_values(req: Request) -> None:
    gen, prg = torch.Generator().manual_seed(1), torch.Generator().manual_seed(2)
    values = secrets(req, gen)
    share0 = draw_share0(req, prg)
    share1 = split(req, values, share0)
    for slot, v, s0, s1 in zip(layout(req), values, share0, share1, strict=True):
        assert s0.shape == s1.shape == v.shape and v.dtype == slot.dtype
        assert torch.equal(s0 ^ s1 if slot.binary else s0 + s1, v)
    assert Request.decode(req.encode()) == req


def test_products_in_the_material_are_products_of_its_masks() -> None:
    a, b, c = secrets(REQUESTS[1], torch.Generator().manual_seed(3))
    assert torch.equal(c, a @ b)
    r, high, msb = secrets(REQUESTS[2], torch.Generator().manual_seed(3))
    assert torch.equal(high, (r >> 8) & ((1 << 56) - 1)) and torch.equal(msb, (r < 0).long())


def test_a_product_item_holds_the_product_of_every_subset_of_its_masks() -> None:
    req = product_request(64, (5,), [True, False, True, False])
    values = secrets(req, torch.Generator().manual_seed(4))
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


def test_replayed_phases_draw_the_same_shares_as_on_demand() -> None:
    phased, direct = SeededProvider(5), SeededProvider(5)
    seen: list[torch.Tensor] = []
    for _ in range(3):  # record once, then prepare ahead twice
        phased.begin(1)
        seen += [t for r in REQUESTS for t in phased.get(r)]
        phased.end()
    expected = [t for _ in range(3) for r in REQUESTS for t in direct.get(r)]
    assert all(torch.equal(a, b) for a, b in zip(seen, expected, strict=True))
    phased.begin(1)
    phased.get(REQUESTS[0])
    with pytest.raises(RuntimeError, match="deviates"):
        phased.get(REQUESTS[0])
