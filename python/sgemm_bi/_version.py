"""The package version: the version of the Rust workspace it binds (a test checks both)."""

__version__ = "0.2.0"
