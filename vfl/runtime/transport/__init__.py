"""Transports behind one interface (``base.Transport``): ``inprocess`` (tests, debugging) and ``ray`` (the product
path); ``factory.make_transport`` picks one; ``socket/`` is the opt-in socket data plane of the training step."""
