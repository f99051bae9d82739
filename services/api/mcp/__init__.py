"""Memora's MCP server (seed 001 tools, retain/search/think): one agent per server binding.

Tools call Memora's REST API through the typed client (`memory.Memory`, `memora_client`): the
same routes, keys and tenant scoping as any client. Mounted on the write API at
`/mcp/{agent_id}` they call that app in-process (reads are forwarded to the query service as for
REST clients); `memora mcp --agent ID` serves stdio and calls the API over the network.
"""
