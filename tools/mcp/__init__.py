"""The MCP bridge: external tool servers behind Bruce's contracts (``bridge``, ``names``), and
Bruce's own tools served to other MCP clients (``serve``)."""
