"""What the installers put in a site directory: the files the ``RECORD`` of each
``.dist-info`` there lists. Read by the in-process classification of library code
(`pcache._usercode`: a directory merely named ``site-packages`` is not an installed
one) and by the persisted key's attribution of modules to distributions
(`pcache._persist_env`). JAX-free.
"""

from __future__ import annotations

import csv
import os

from pcache._memos import memo

_RECORDS: dict = memo("records", {})  # site dir -> (its .dist-info names, files)


def recorded(root: str) -> dict:
    """The paths (relative to ``root``, ``/``-separated) that the RECORD files of the
    distributions installed in ``root`` list, each with its distribution's
    ``.dist-info`` name (a path two list: both, joined by ``+``). Memoized per
    directory and its listing of ``.dist-info`` directories, so an install or an
    uninstall while the process runs is read again."""
    try:
        with os.scandir(root) as it:
            infos = tuple(sorted(e.name for e in it if e.name.endswith(".dist-info")))
    except OSError:
        return {}
    e = _RECORDS.get(root)
    if e is not None and e[0] == infos:
        return e[1]
    files: dict = {}
    for info in infos:
        try:
            with open(os.path.join(root, info, "RECORD"), newline="", encoding="utf-8") as fh:
                for row in csv.reader(fh):
                    if row:
                        files[row[0]] = f"{files[row[0]]}+{info}" if row[0] in files else info
        except OSError:
            continue
    if len(_RECORDS) > 256:
        _RECORDS.clear()
    _RECORDS[root] = (infos, files)
    return files


__all__ = ["recorded"]
