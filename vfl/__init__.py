"""Core runtime of the framework: messages, transports, engine, strategies ABC, privacy, secagg.

Imports only go down: ``simulations -> strategies/parties -> vfl``; nothing here imports the
layers above.
"""

__version__ = "0.1.0"
