"""A persisted-trace scenario (`tests.persist_prog scenario`): programs whose output
trees hold NamedTuples (the program's, nested, and JAX's own ``SlogdetResult``),
served to a new process with the very classes a trace there makes; one class that
its module no longer names under its name, and a local one, are never stored
(`test_trace_persist`)."""

import collections
import typing

import jax
import jax.numpy as jnp

show = globals()["show"]  # (given by the runner, as ``x``)
x = globals()["x"]


class Stats(typing.NamedTuple):
    mean: jax.Array
    parts: tuple


Pair = collections.namedtuple("Pair", "lo hi")


def stats(v):
    return Stats(jnp.mean(v), (Pair(jnp.min(v), jnp.max(v)), None, [v * 2.0]))


out = jax.jit(stats)(x)
show("stats-type", lambda: jnp.float32(type(out) is Stats and type(out.parts[0]) is Pair))
show("stats", lambda: jnp.concatenate([out.mean[None], out.parts[0].hi[None], out.parts[2][0]]))
sd = jax.jit(jnp.linalg.slogdet)(jnp.eye(3) * x[:, None] + 2.0)
show("slogdet-type", lambda: jnp.float32(type(sd).__name__ == "SlogdetResult"))
show("slogdet", lambda: sd.logabsdet)


class Renamed(typing.NamedTuple):
    a: jax.Array


Shadow = Renamed
Renamed = collections.namedtuple("Renamed", "a")  # (the name now holds another class)
r = jax.jit(lambda v: Shadow(v + 1.0))(x)
show("shadowed-type", lambda: jnp.float32(type(r) is Shadow))


def local_class():
    Local = collections.namedtuple("Local", "a")
    return jax.jit(lambda v: Local(v * 3.0))(x)


show("local", lambda: local_class().a)
