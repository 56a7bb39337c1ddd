"""Durable execution engines beyond the embedded journal.

``jeeves_router.durable.dbos`` runs routed runs as DBOS workflows on PostgreSQL (the
optional extra ``jeeves-router[dbos]``). It is imported explicitly, so this package costs
nothing when DBOS is not installed.
"""

__all__: list[str] = []
