"""Registered algorithms. Importing this package registers every built-in strategy."""
