"""The HTTP plumbing of :mod:`app.web.http`: templating's safety rules, the response models, the real
server under hostile clients, hostile inputs and configs answered small and fast, a short load."""
