"""``python -m jeeves_router.cli``: the ``jeeves-router`` command."""

from ._app import main

main()
