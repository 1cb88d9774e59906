"""The answer pipeline: what the forum's assistant calls around its LLM.

``pipeline.RetrievalPipeline`` is ``POST /v1/retrieve`` (input gate, condensing, wide hybrid
search, rerank, zones, evidence, stored retrievals); ``sanitize_service`` is ``POST
/v1/sanitize``; ``zone_calibration`` sets the zones' thresholds from the forum's own questions
(``sidecar calibrate``). The pure rules they apply live in ``sidecar.core`` (``gate``, ``zones``,
``condense``, ``evidence``, ``answerability``, ``sanitize``).

Imports: ``search``, ``core``, ``db``, ``config``, ``errors`` and ``models``; the process's
resources come in through ``pipeline.PipelineResources``, a protocol, never ``runtime``.
Imported by ``runtime`` (which builds the pipeline and the sanitizer), ``api``, ``cli`` and
``evaluation``.
"""
