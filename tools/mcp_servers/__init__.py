"""Standalone MCP servers: each runs as its own process and speaks MCP over stdio.

``python -m tools.mcp_servers.calendar`` is the worked example: a small local calendar.
"""
