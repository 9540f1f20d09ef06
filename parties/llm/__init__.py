"""Split-LLM parties: model servers holding a frozen pretrained transformer, and the client."""
