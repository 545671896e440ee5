"""Accounts: signing in, the account lifecycle, and the limits and rules that guard them."""
