"""A few training steps of the secure model and of the plaintext reference, side by side."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from tessera_ml.algorithms.mpc_mixed import data
from tessera_ml.algorithms.mpc_mixed.local import engines, share_inputs
from tessera_ml.algorithms.mpc_mixed.model import SharedMlp, init_params, train_step
from tessera_ml.algorithms.mpc_mixed.precision import Precision
from tessera_ml.algorithms.mpc_mixed.protocols import Engine
from tessera_ml.bench.mpc_mixed.reference import PlainMlp
from tessera_ml.comm.peer import run_pair


@dataclass
class Run:
    secure: dict[str, torch.Tensor]
    plain: dict[str, torch.Tensor]
    initial: dict[str, torch.Tensor]
    received: tuple[list[torch.Tensor], list[torch.Tensor]]
    x: torch.Tensor
    onehot: torch.Tensor
    prec: Precision


def train_both(
    mode: str,
    steps: int,
    batch: int = 32,
    hidden: int = 16,
    lr: float = 0.5,
    comparison: str = "tree",
    truncation: str = "masked",
) -> Run:
    prec = Precision.of(mode, 12, 20)
    feats = data.features("sklearn:digits")
    labels, classes = data.labels("sklearn:digits")
    x = feats.train[: steps * batch]
    onehot = torch.nn.functional.one_hot(labels.train[: steps * batch], classes).double()
    params = init_params([x.shape[1], hidden, classes], True, 0)
    # not the in-process dealer's seeds (0 and 1): input shares must not repeat its masks
    xf, xb, yb = share_inputs(prec, x, onehot, 1000)

    def party(eng: Engine, i: int) -> dict[str, torch.Tensor]:
        model = SharedMlp.from_plain(eng, params, prec.backward, True)
        for s in range(steps):
            rows = slice(s * batch, (s + 1) * batch)
            train_step(eng, prec, model, xf[i][rows], xb[i][rows], yb[i][rows], lr)
        return {k: eng.reveal(v) for k, v in model.params.items()}

    e0, e1 = engines(0, record=True, comparison=comparison, truncation=truncation)
    out = run_pair(party, (e0, 0), (e1, 1))
    revealed = out[0]
    assert isinstance(revealed, dict)
    ref = PlainMlp(params, True)
    for s in range(steps):
        rows = slice(s * batch, (s + 1) * batch)
        ref.train_step(x[rows], onehot[rows], lr)
    secure = {k: prec.backward.decode(v) for k, v in revealed.items()}
    assert e0.peer.record is not None and e1.peer.record is not None
    return Run(secure, ref.p, params, (e0.peer.record, e1.peer.record), x, onehot, prec)
