"""The socket data plane (``transport.data_plane: socket``): a vertical training step over plain TCP between
the host actors. ``chain`` drives it from the driver, ``host`` is the host side, ``frames`` the wire format."""
