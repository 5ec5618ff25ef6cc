# Review 39 (cal1): the trace itself advances calendar's first weekday (setfirstweekday): calendar is no longer a plain module since.
import calendar


def f(x):
    w = calendar.firstweekday()
    calendar.setfirstweekday((w + 1) % 7)
    return x * float(w)


mk = lambda: jax.jit(lambda x: f(x))
calendar.setfirstweekday(1)
for i in range(3):
    show(f"s{i}", lambda: mk()(x))
calendar.setfirstweekday(0)
