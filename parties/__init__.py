"""Party-side logic: passive parties, the active party (server), LLM client and model servers."""

# vfl before anything of ours imports flwr: its warnings filter (vfl/__init__.py, cheap: the API is lazy)
# silences flwr's protobuf gencode notices (nine lines when a party module is imported first).
import vfl  # noqa: F401
