"""The package version (the bottom of the package: result headers and reports name it)."""

__version__ = "0.1.0"
