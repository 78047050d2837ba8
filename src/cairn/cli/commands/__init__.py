"""One module per command group; each is a thin layer over the API."""
