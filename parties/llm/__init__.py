"""Split-LLM parties, one package per algorithm (as peft does with ``tuners/<method>/``):
``common`` (backbone, LoRA, shared wire names), ``p3eft`` (client + model servers), ``sap`` (vendor + customer)."""
