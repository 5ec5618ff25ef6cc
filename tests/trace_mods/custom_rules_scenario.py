"""A persisted-trace scenario (`tests.persist_prog scenario`): programs holding the
program's own custom_jvp and custom_vjp rules and JAX's (``relu``), dispatched,
then transformed, traced and lowered. Their stored traces hold stand-ins for the
rules: served to a top-level dispatch only (`test_trace_persist`)."""

import jax
import jax.extend
import jax.numpy as jnp

show = globals()["show"]  # (given by the runner, as ``x``)
x = globals()["x"]


@jax.custom_vjp
def clip_grad(v):
    return v


clip_grad.defvjp(lambda v: (v, None), lambda _, g: (jnp.clip(g, -1.0, 1.0),))


@jax.custom_jvp
def soft(v):
    return jnp.log1p(jnp.exp(v))


soft.defjvp(lambda p, t: (soft(p[0]), t[0] * jax.nn.sigmoid(p[0])))


def f(v):
    return jnp.sum(soft(jax.nn.relu(clip_grad(v * 3.0))) ** 2)


def as_fun(traced):
    return lambda v: jax.extend.core.jaxpr_as_fun(traced.jaxpr)(v)[0]


# .trace(), .lower(), .eval_shape() of fresh jit objects: never handed stand-ins
t = jax.jit(f).trace(x)
show("trace-grad", lambda: jax.grad(as_fun(t))(x))
show("lower", lambda: jnp.float32(len(jax.jit(f).lower(x).as_text()) > 0))
show("eval_shape", lambda: jnp.float32(jax.jit(f).eval_shape(x).shape == ()))
# dispatched first (served), then transformed and traced: traced afresh
jf = jax.jit(f)
show("dispatch", lambda: jf(x))
show("grad-after", lambda: jax.grad(jf)(x))
show("vmap-after", lambda: jax.vmap(jf)(jnp.stack([x, x + 1.0])))
jh = jax.jit(lambda v: jnp.sum(soft(jax.nn.relu(v * 2.0))))  # (no custom_vjp: forward mode)
show("dispatch-fwd", lambda: jh(x))
show("jvp-after", lambda: jax.jvp(jh, (x,), (x,))[1])
show("linearize-after", lambda: jax.linearize(jh, x)[1](x))
show("outer-jit-grad", lambda: jax.jit(jax.grad(jf))(x))
t2 = jf.trace(x)
show("trace-after", lambda: jax.grad(as_fun(t2))(x))
jg = jax.jit(f)
show("dispatch-again", lambda: jg(x + 2.0))
show("dispatch-dce", lambda: jax.jit(lambda v: (f(v), soft(v))[0])(x))
with jax.disable_jit():
    show("no-jit", lambda: jg(x))
show("grad-program", lambda: jax.jit(jax.grad(f))(x))
