"""Falcon resources of the reference ``/v1`` service: validate, call a provider, dump."""
