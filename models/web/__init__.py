"""What both Flask apps share, the sidecar API and the model host: bearer-token authentication
(:mod:`models.web.auth`) and request metrics (:mod:`models.web.metrics`).

It lives under ``models`` because the model host is there and the sidecar already depends on
``models`` (never the other way). Light on purpose: no numpy, no ONNX Runtime.
"""
