"""The ``dpstream`` command line: one entry point, one module per concern.

The top layer: may import every other layer.
"""
