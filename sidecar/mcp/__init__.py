"""The MCP server: the forum's search, related topics, retrieval and answers as tools any MCP client
(discourse-ai's agents, desktop assistants, IDEs) can call over ``POST /mcp``.

``protocol`` speaks JSON-RPC 2.0 over streamable HTTP, stateless (protocol versions 2025-03-26,
2025-06-18 and 2025-11-25; the 2026-07-28 ``server/discover`` probe is answered "method not
found", so a client falls back to ``initialize``), parsing and serializing with the official
SDK's types (``mcp_types``); ``tools`` says what each tool takes and is for (its input JSON
schema is the pydantic model that validates its arguments); ``toolbox`` runs them on the
services and turns every failure into a tool result with ``isError``; ``render`` writes their
results as the Markdown an LLM reads. See docs/mcp.md.

Imports: ``answer``, ``related``, ``search``, ``core``, ``config``, ``errors`` and ``models``;
the process's resources come in through ``toolbox.McpResources``, a protocol. Imported by
``api`` (``routes_mcp``, the HTTP route, its authentication and metrics). Nothing is imported
here.
"""
