# gunicorn's documented rule of thumb, as many services copy it.
import multiprocessing

bind = "0.0.0.0:8000"
workers = multiprocessing.cpu_count() * 2 + 1
timeout = 120
