"""One module per ``kaiwo`` command; each exposes the function typer registers."""
