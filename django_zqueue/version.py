"""This package's version, in a module of its own that imports nothing of the package:
the package's face (``django_zqueue.__version__``), the build metadata and the protocol
library read it here."""

__version__ = "0.1.0"
