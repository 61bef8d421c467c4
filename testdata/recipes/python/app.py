# A WSGI app that builds a NumPy array per request.
import numpy as np


def app(environ, start_response):
    body = str(np.ones((512, 512)).sum()).encode()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
