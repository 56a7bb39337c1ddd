"""``python -m jeeves_router.cli``: the ``jeeves-router`` command."""

from . import main

main()
