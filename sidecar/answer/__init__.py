"""The answer pipeline: what the forum's assistant calls around its LLM.

``pipeline.RetrievalPipeline`` is ``POST /v1/retrieve`` (input gate, condensing, wide hybrid
search, rerank, zones, evidence, stored retrievals); the pure rules it applies live in
``sidecar.core`` (``gate``, ``zones``, ``condense``, ``evidence``).
"""
