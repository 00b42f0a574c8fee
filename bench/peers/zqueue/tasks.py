"""The benchmark job as a django_zqueue task (registered as ``tasks.noop``)."""

from benchlib import job_record

from django_zqueue import task


@task
def noop(t=0.0):
    job_record(t)
