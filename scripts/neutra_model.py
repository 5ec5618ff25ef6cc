"""The class NumPyro's NeuTra workload defines at module level, as its upstream
example does (``neutra.py`` defines its ``DualMoonDistribution`` at the top
of the script): a class a function defines is a new class on every call, which no
other process can name, so persisted traces never serve it.

Imported by `scripts/real_programs.py`'s neutra workload only (it needs NumPyro)."""

from __future__ import annotations

import jax.numpy as jnp
import numpyro.distributions as dist
from jax.scipy.special import logsumexp
from numpyro.distributions import constraints


class DualMoon(dist.Distribution):
    """NumPyro's NeuTra example's banana-shaped density on R^2."""

    support = constraints.real_vector

    def __init__(self):
        super().__init__(event_shape=(2,))

    def sample(self, key, sample_shape=()):
        return jnp.zeros(sample_shape + self.event_shape)

    def log_prob(self, x):
        term1 = 0.5 * ((jnp.linalg.norm(x, axis=-1) - 2) / 0.4) ** 2
        term2 = -0.5 * ((x[..., :1] + jnp.array([-2.0, 2.0])) / 0.6) ** 2
        return -(term1 - logsumexp(term2, axis=-1))
