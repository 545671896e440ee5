"""Webhooks: which events a subscription selects, where it may send, how it is signed, and the sender."""
