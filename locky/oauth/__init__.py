"""Locky's OpenID provider and OAuth 2 authorization server (docs/http/oauth.md), built on
Authlib's server side: :mod:`.server` adapts Authlib to Falcon and Locky's clients,
:mod:`.grants` issues Locky's tokens, the other modules are its HTTP endpoints and pages.
"""
