# A Celery app as its tutorial writes it: the broker from the environment, no concurrency.
import os

from celery import Celery

app = Celery("proj", broker=os.environ.get("CELERY_BROKER_URL", "redis://localhost:6379/0"))
app.conf.update(task_acks_late=True, worker_prefetch_multiplier=1)
