"""The views of :mod:`app.web.views` as the page shows them: the charts against their table twins, the
model-parallel section, presenter mode."""
