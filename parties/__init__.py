"""Party-side logic: passive parties, the active party (server), LLM client and model servers."""
