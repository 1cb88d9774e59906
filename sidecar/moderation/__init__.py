"""Moderator review of abstain and cautious retrievals: list, label, calibrate the zones.

``models`` (filters and label requests, validated by pydantic), ``repository`` (SQL over
``sidecar_retrievals`` and ``sidecar_retrieval_labels``), ``service`` (what the pages and the JSON
API call), ``auth`` (the moderator key: a signed session cookie for the pages, a bearer token
for the API) and ``throttle`` (wrong keys counted in Redis: the moderator key's, and the API
key's too). The threshold arithmetic is pure, in ``sidecar.core.calibration``.

Imports: ``search`` (the profile's calibrated zones), ``core``, ``db``, ``config``, ``errors`` and
``models``. Imported by ``runtime`` (which builds the service and the auth) and ``api``.
"""
