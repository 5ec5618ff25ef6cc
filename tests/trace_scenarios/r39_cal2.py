# Review 39 (cal2): calendar's first weekday set between steps: calendar is no longer a plain module since.
import calendar

mk = lambda: jax.jit(lambda x: x * float(calendar.firstweekday()))
for w in (1, 1, 2, 2):
    calendar.setfirstweekday(w)
    show(f"w{w}", lambda: mk()(x))
calendar.setfirstweekday(0)
