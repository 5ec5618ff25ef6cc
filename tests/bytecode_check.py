"""Compare `pcache/_bytecode.py`'s raw reads with ``dis`` on every code object of the
``.py`` files directly in each directory given (standard library only, so any
interpreter runs it): ``python bytecode_check.py PATH/_bytecode.py DIR...``. Prints
``codes N differ M`` and the first differences."""

import dis
import importlib.util
import os
import sys
import types

spec = importlib.util.spec_from_file_location("pcache_bytecode_alone", sys.argv[1])
bc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bc)
NAMED = set(dis.hasname)
CONST = set(dis.hasconst)
HASARG = set(getattr(dis, "hasarg", range(dis.HAVE_ARGUMENT, 256)))
STORES = frozenset(
    dis.opmap[n]
    for n in ("STORE_GLOBAL", "DELETE_GLOBAL", "STORE_ATTR", "DELETE_ATTR", "STORE_NAME")
)


def by_dis(c):
    def val(i):
        if i.opcode not in NAMED | CONST:
            return None
        return c.co_consts[i.arg] if i.opname == "KW_NAMES" else i.argval  # (3.11's dis: unknown)

    return [(i.opname, i.arg, val(i)) for i in dis.get_instructions(c)]


def by_ops(c):
    return [
        (
            name,
            arg if dis.opmap[name] in HASARG else None,
            v if dis.opmap[name] in NAMED | CONST else None,
        )
        for name, arg, v in bc.ops(c)
    ]


def codes(top):
    todo = [top]
    while todo:
        c = todo.pop()
        yield c
        todo += [k for k in c.co_consts if type(k) is types.CodeType]


n = bad = 0
for root in sys.argv[2:]:
    for name in sorted(os.listdir(root)):
        path = os.path.join(root, name)
        if not name.endswith(".py") or not os.path.isfile(path):
            continue
        try:
            with open(path, "rb") as fh:
                top = compile(fh.read(), path, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            continue
        for c in codes(top):
            n += 1
            want = by_dis(c)
            stored = {v for op, _, v in want if dis.opmap[op] in STORES}
            if by_ops(c) != want or bc.named_by(c, STORES) != stored:
                bad += 1
                if bad <= 3:
                    print("DIFF", path, c.co_qualname if hasattr(c, "co_qualname") else c.co_name)
print(f"codes {n} differ {bad}")
