"""The small CNN on shares follows its plaintext reference."""

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.local import engines, share_inputs
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp
from tessera_ml.algorithms.mpc_mixed.model_cnn import (
    PlainCnn,
    cnn_train_step,
    init_cnn,
    patches,
    pool,
    unpool,
)
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.comm.peer import run_pair


def test_patches_pooling_and_its_backward_on_a_known_image() -> None:
    img = torch.arange(64, dtype=torch.int64).view(1, 64)
    cols = patches(img)
    assert cols.shape == (64, 9)
    assert cols[0].tolist() == [0, 0, 0, 0, 0, 1, 0, 8, 9]  # top-left corner, zero padded
    assert cols[9].tolist() == [0, 1, 2, 8, 9, 10, 16, 17, 18]
    z = torch.ones(64, 2, dtype=torch.int32)
    assert torch.equal(pool(z, 1), torch.full((1, 32), 4, dtype=torch.int32))
    d = torch.arange(32, dtype=torch.int64).view(1, 32)
    # pooling and unpooling are adjoint: <pool(z), d> == <z, unpool(d)>
    zz = torch.arange(128, dtype=torch.int64).view(64, 2)
    assert (pool(zz, 1) * d).sum() == (zz * unpool(d, 2)).sum()


def test_secure_cnn_steps_track_the_plaintext_reference() -> None:
    prec = Precision.of("mixed", 12, 20)
    feats = data.features("sklearn:digits")
    labels, classes = data.labels("sklearn:digits")
    batch, steps, lr = 8, 2, 0.05
    x = feats.train[: batch * steps]
    onehot = torch.nn.functional.one_hot(labels.train[: batch * steps], classes).double()
    params = init_cnn(2, classes, 0)
    xf, xb, yb = share_inputs(prec, x, onehot, 2)

    def party(eng: Engine, i: int) -> dict[str, torch.Tensor]:
        model = SharedMlp.from_plain(eng, params, prec.backward, True)
        for s in range(steps):
            rows = slice(s * batch, (s + 1) * batch)
            cnn_train_step(eng, prec, model, xf[i][rows], xb[i][rows], yb[i][rows], lr)
        return {k: eng.reveal(v) for k, v in model.params.items()}

    e0, e1 = engines(0)
    revealed = run_pair(party, (e0, 0), (e1, 1))[0]
    assert isinstance(revealed, dict)
    ref = PlainCnn(params)
    for s in range(steps):
        rows = slice(s * batch, (s + 1) * batch)
        ref.train_step(x[rows], onehot[rows], lr)
    for name, value in ref.p.items():
        moved = (value - params[name]).abs().max().item()
        err = (prec.backward.decode(revealed[name]) - value).abs().max().item()
        assert err < max(moved / 5, 1e-3), name
