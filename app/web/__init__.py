"""The browser lab: FastAPI app factory, routes and htmx fragments over the ledger core."""
