"""The equinox Modules of `scripts/real_programs.py`'s diffrax workloads, at module
level as in diffrax's neural-ODE example (a class a function defines is a new class
on every call, which no other process can name: persisted traces never serve it).

Imported by those workloads only (it needs diffrax and equinox)."""

from __future__ import annotations

import diffrax
import equinox as eqx


class Field(eqx.Module):
    """A vector field: an MLP of the state."""

    mlp: eqx.nn.MLP

    def __call__(self, t, y, args):
        return self.mlp(y)


class NeuralODE(eqx.Module):
    """diffrax's neural-ODE example's model: a Tsit5 solve of ``func``, saved at ``ts``."""

    func: Field

    def __call__(self, ts, y0):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(self.func),
            diffrax.Tsit5(),
            t0=ts[0],
            t1=ts[-1],
            dt0=ts[1] - ts[0],
            y0=y0,
            stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-6),
            saveat=diffrax.SaveAt(ts=ts),
        )
        return sol.ys
