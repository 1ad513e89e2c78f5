"""The HTTP routes, one router per concern: routes parse, call the core and a view, and render."""
