"""Static files shipped inside the package: the Swagger UI."""
