"""HTTP plumbing: settings, dependencies, limits, security headers, errors, templating, static files, the server."""
