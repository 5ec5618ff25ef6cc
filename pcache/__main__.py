"""``python -m pcache``: the ``pcache`` command."""

from pcache.cli import main

if __name__ == "__main__":
    main()
