"""``python -m compstack.cli``: the same entry point as the ``compstack`` command."""

from compstack.cli import main

if __name__ == "__main__":
    main()
