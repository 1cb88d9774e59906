"""Moderator review of abstain and cautious retrievals: list, label, calibrate the zones.

``models`` (filters and label requests, validated by pydantic), ``repository`` (SQL over
``sidecar_retrievals`` and ``sidecar_retrieval_labels``), ``service`` (what the pages and the JSON
API call) and ``auth`` (the moderator key: a signed session cookie for the pages, a bearer token
for the API). The threshold arithmetic is pure, in ``sidecar.core.calibration``.
"""
