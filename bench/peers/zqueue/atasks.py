"""The benchmark job as an ``async def`` django_zqueue task, under the name of the sync
one (``tasks.noop``), for the event-loop lane's variants of ``process.py``: a worker given
``ZQBENCH_TASK_MODULES=atasks`` runs the very jobs the sync variants run (the same queued
bodies, restored from the same snapshot) as ``await benchlib.ajob_record(t)``."""

from benchlib import ajob_record

from django_zqueue import task


@task(name="tasks.noop")
async def noop(t: float = 0.0) -> None:
    await ajob_record(t)
