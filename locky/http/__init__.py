"""The HTTP layer around the resources: reading bodies, middleware, and the client address."""
