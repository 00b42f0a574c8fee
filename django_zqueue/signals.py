"""Django signals sent by the worker, in the thread that runs the job.

- ``job_started(sender=Task, job=JobContext)``
- ``job_finished(sender=Task, job=JobContext, result=..., duration=seconds)``
- ``job_failed(sender=Task | None, job=JobContext, exception=exc, traceback=str,
  will_retry=bool)``: also for unknown tasks and undecodable payloads (sender None).
"""

from django.dispatch import Signal

job_started = Signal()
job_finished = Signal()
job_failed = Signal()
